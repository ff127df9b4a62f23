"""dag.config_files: files layered as `--configfile` layers them, one line per bad file."""

from __future__ import annotations

import pytest

from grpo_dial.dag.config_files import layered_config, merge_config


def test_mappings_merge_key_by_key_and_everything_else_replaces():
    base = {"train": {"lr": 0.1, "steps": 5, "seeds": [0, 1]}, "dials": {"grpo": {"eps": 1}}}
    over = {"train": {"steps": 7, "seeds": [3]}, "dials": {"grpo": None}, "new": {"a": 1}}
    got = merge_config(base, over)
    assert got == {"train": {"lr": 0.1, "steps": 7, "seeds": [3]}, "dials": {"grpo": None},
                   "new": {"a": 1}}  # fmt: skip
    assert base["train"] == {"lr": 0.1, "steps": 5, "seeds": [0, 1]}  # the base is not changed
    # a mapping over a scalar (and a scalar over a mapping) replaces it whole
    assert merge_config({"a": 1, "b": {"c": 2}}, {"a": {"x": 1}, "b": 3}) == {"a": {"x": 1}, "b": 3}


def test_files_layer_in_order(tmp_path):
    (tmp_path / "a.yaml").write_text("train: {lr: 1.0e-3, steps: 5}\nresults_dir: r\n")
    (tmp_path / "b.yaml").write_text("train: {steps: 9}\n")
    (tmp_path / "empty.yaml").write_text("# nothing\n")
    (tmp_path / "c.yaml").write_text("results_dir: s\n")
    files = [tmp_path / n for n in ("a.yaml", "b.yaml", "empty.yaml", "c.yaml")]
    assert layered_config(files) == {"train": {"lr": 1e-3, "steps": 9}, "results_dir": "s"}


@pytest.mark.parametrize(("text", "message"), [
    (None, "config file not found: {path}"),
    ("- 1\n- 2\n", "config error in {path}: the top level must be a mapping of keys, got list"),
    ("a: 1\na: 2\n", "config error in {path}: key 'a' is given twice in one mapping (lines 1 and "
                     "2); YAML would keep the last silently"),
])  # fmt: skip
def test_a_bad_file_is_one_line_naming_it(tmp_path, text, message):
    path = tmp_path / "bad.yaml"
    if text is not None:
        path.write_text(text)
    (tmp_path / "good.yaml").write_text("a: 0\n")
    with pytest.raises(ValueError) as err:
        layered_config([tmp_path / "good.yaml", path])
    assert str(err.value) == message.format(path=path)

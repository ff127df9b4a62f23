"""dag.inputs: each input check's line names its key and the path it missed, public files and
task specs resolved, a table's hub hint only where the hub can be read."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from grpo_dial.dag import ConfigError
from grpo_dial.dag.inputs import Inputs, task

ROOT = Path(__file__).resolve().parents[2]


def _inputs(tmp_path, public=None, **over) -> Inputs:
    config = {
        "results_dir": str(tmp_path / "results"),
        "resources_dir": str(tmp_path / "resources"),
        "offline": False,
        "data_mirror": None,
        "public_data": public or {},
        **over,
    }
    return Inputs(config, ROOT, tmp_path)


def _public(tmp_path) -> dict:
    return {"pub": {"file": "d/x.jsonl", "url": "https://example.org/x", "sha256": "0" * 64}}


def _line(where: str, message: str) -> str:
    return f"^{re.escape(f'config error at {where!r}: {message}')}$"


def test_nesting_folders_are_blamed_on_resources_dir(tmp_path):
    with pytest.raises(ConfigError, match="^config error at 'resources_dir': .* must not nest$"):
        _inputs(tmp_path, resources_dir=str(tmp_path / "results" / "r"))


def test_a_bad_public_entry_is_named_with_its_problem(tmp_path):
    bad = {"pub": {"file": "x.jsonl", "url": "ftp://x", "sha256": "0" * 64}}
    line = "public_data.pub.url must be an https://, http:// or file:// URL"
    with pytest.raises(ConfigError, match=_line("public_data.pub", line)):
        _inputs(tmp_path, public=bad)


def test_a_public_file_offline_and_absent_is_refused_with_its_path(tmp_path):
    inputs = _inputs(tmp_path, public=_public(tmp_path), offline=True)
    where = tmp_path / "resources" / "d" / "x.jsonl"
    line = f"offline: true, but public file 'pub' is neither in data_mirror nor at {where}"
    with pytest.raises(ConfigError, match=_line("k", line)):
        inputs.data_file({"public": "pub"}, "k")
    assert _inputs(tmp_path, public=_public(tmp_path)).data_file({"public": "pub"}, "k") == str(
        where
    )


def test_a_missing_path_names_itself(tmp_path):
    gone = str(tmp_path / "gone.jsonl")
    with pytest.raises(ConfigError, match=_line("k", f"input path not found: {gone}")):
        _inputs(tmp_path).data_file(gone, "k")


def test_local_dir_needs_a_directory_and_never_hints_the_hub(tmp_path):
    inputs = _inputs(tmp_path)
    inputs.local_dir(str(tmp_path), "tok", "tokenizer directory")
    inputs.local_dir(None, "tok", "tokenizer directory")
    with pytest.raises(ConfigError, match=_line("tok", "tokenizer directory not found: o/n")):
        inputs.local_dir("o/n", "tok", "tokenizer directory")


def test_table_sources_lines(tmp_path):
    inputs = _inputs(tmp_path, public=_public(tmp_path))
    line = _line("passrate_tables.s.path", "a synthetic table reads no file")
    with pytest.raises(ConfigError, match=line):
        inputs.table_input("s", {"kind": "synthetic", "path": "x"})
    with pytest.raises(ConfigError, match=r"public \(a public_data name\) or hub \(bigmath\)$"):
        inputs.table_input("b", {"kind": "bigmath"})
    with pytest.raises(ConfigError, match=r"public \(a public_data name\)$"):
        inputs.table_input("m", {"kind": "math_cot"})
    got = inputs.table_input("p", {"kind": "math_cot", "public": "pub"})
    assert got == str(tmp_path / "resources" / "d" / "x.jsonl")
    with pytest.raises(ConfigError, match="^config error at 'passrate_tables.p.public': unknown"):
        inputs.table_input("p", {"kind": "math_cot", "public": "nope"})


def test_a_hub_shaped_table_path_is_hinted_only_for_bigmath(tmp_path):
    inputs = _inputs(tmp_path)
    hinted = "input path not found: o/n (a local path; to read it from the Hugging Face hub, "
    with pytest.raises(ConfigError, match=re.escape(hinted + "write hub: o/n)")):
        inputs.table_input("b", {"kind": "bigmath", "path": "o/n", "optional": False})
    with pytest.raises(
        ConfigError, match=_line("passrate_tables.m.path", "input path not found: o/n")
    ):
        inputs.table_input("m", {"kind": "math_cot", "path": "o/n", "optional": False})


def test_task_specs_resolve_public_check_hub_and_path(tmp_path):
    inputs = _inputs(tmp_path, public=_public(tmp_path))
    plain = {"name": "x"}
    assert inputs.task_spec(plain, "w") is plain and inputs.task_spec("text", "w") == "text"
    got = inputs.task_spec({"dataset": "gsm8k", "public": "pub", "split": "test"}, "w")
    assert got == {
        "dataset": "gsm8k",
        "path": str(tmp_path / "resources/d/x.jsonl"),
        "split": "test",
    }
    with pytest.raises(ConfigError, match=_line("w", "give one of path, public, hub")):
        inputs.task_spec({"dataset": "gsm8k", "public": "pub", "path": "a"}, "w")
    with pytest.raises(ConfigError, match=_line("w", "give one of path, public, hub")):
        inputs.task_spec({"dataset": "gsm8k", "public": "pub", "hub": "o/n"}, "w")
    with pytest.raises(ConfigError, match="^config error at 'w.hub': 'bad' is not a hub id"):
        inputs.task_spec({"dataset": "gsm8k", "hub": "bad"}, "w")
    hinted = "input path not found: o/n (a local path; to read it from the Hugging Face hub, "
    with pytest.raises(
        ConfigError, match="^config error at 'w.path': " + re.escape(hinted + "write hub: o/n)")
    ):
        inputs.task_spec({"dataset": "gsm8k", "path": "o/n"}, "w")


def test_task_resolves_each_listed_spec_under_its_option(tmp_path):
    inputs = _inputs(tmp_path, public=_public(tmp_path))
    path, local = str(tmp_path / "resources" / "d" / "x.jsonl"), tmp_path / "h.jsonl"
    local.write_text("")
    config = {"task": {"name": "math", "options": {
        "train": [{"dataset": "gsm8k", "public": "pub", "split": "train"}],
        "heldout": [{"dataset": "gsm8k", "path": str(local), "split": "test"}],
    }}}  # fmt: skip
    got = task(config, inputs)
    assert got["name"] == "math"
    assert got["options"]["train"] == [{"dataset": "gsm8k", "path": path, "split": "train"}]
    config["task"]["options"]["train"][0] = {"dataset": "gsm8k", "hub": "bad"}
    with pytest.raises(ConfigError, match="^config error at 'task.options.train\\[0\\].hub'"):
        task(config, inputs)


def test_an_unsafe_output_folder_is_blamed_on_its_key(tmp_path):
    with pytest.raises(ConfigError, match=_line("results_dir", "must not be empty")):
        _inputs(tmp_path, results_dir="")


def test_a_mirror_copy_is_read_in_place(tmp_path):
    mirror = tmp_path / "mirror"
    (mirror / "d").mkdir(parents=True)
    (mirror / "d" / "x.jsonl").write_text("{}\n")
    # sha256 of the 3 bytes "{}\n"
    sha = "ca3d163bab055381827226140568f3bef7eaac187cebd76878e0b63e9e442356"
    public = {"pub": {"file": "d/x.jsonl", "url": "https://example.org/x", "sha256": sha}}
    inputs = _inputs(tmp_path, public=public, data_mirror=str(mirror), offline=True)
    assert inputs.data_file({"public": "pub"}, "k") == str(mirror / "d" / "x.jsonl")


def test_task_inputs_are_the_specs_with_a_path():
    from grpo_dial.dag.inputs import task_inputs

    options = {
        "train": [{"dataset": "gsm8k", "hub": "o/n"}, {"dataset": "gsm8k", "path": "p"}],
        "heldout": "text",
    }
    assert task_inputs({"name": "math", "options": options}) == {"task_train_1": "p"}

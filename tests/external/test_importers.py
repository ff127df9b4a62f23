"""Importers of foreign rollout logs: fixtures written here in TRL's, verl's and a generic layout,
group ids / k / G against hand counts and a loop reference, the correctness rule, token lengths,
skipped rows, and one-line errors naming the bad file, row or column."""

from __future__ import annotations

import hashlib
import json
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from grpo_dial.external.importers import (
    RESPONSE_COLUMNS,
    CorrectRule,
    ImportReport,
    import_generic,
    import_run,
    import_trl,
    import_verl,
)


def _msg(excinfo: pytest.ExceptionInfo) -> str:
    message = str(excinfo.value)
    assert "\n" not in message
    return message


def _pid(text: str) -> str:
    return "p-" + hashlib.sha1(text.encode("utf-8")).hexdigest()[:12]


def _chat(text: str, role: str = "user") -> list[dict]:
    return [{"role": role, "content": text}]


# --------------------------------------------------------------------------- fixtures

# step 1, file order A B A C B A: groups A=0 (k 2 of 3), B=1 (all wrong, 2), C=2 (singleton)
STEP1 = [
    ("A", "a1", 1.0, 1.0, 0.5),
    ("B", "bb1", 0.0, 1.0, -0.7),
    ("A", "a22", 0.0, 0.0, -1.0),
    ("C", "c", 1.0, 0.0, 0.0),
    ("B", "bb22", 0.0, 0.0, 0.7),
    ("A", "a333", 1.0, 1.0, 0.5),
]
# step 2, conversational: D first (all correct, 2), then A (k 1 of 2)
STEP2 = [
    ("D", "dd", 1.0, 1.0, 0.0),
    ("A", "x", 0.0, 1.0, -1.0),
    ("D", "ddd", 1.0, 0.0, 0.0),
    ("A", "yy", 1.0, 1.0, 1.0),
]


def write_trl(root: Path) -> Path:
    """A TRL output_dir: completions_00001 (string prompts), completions_00002 (conversational),
    reward columns accuracy_reward and format_reward, an extra text column and `advantage`."""
    comp = root / "completions"
    for step, rows, chat in ((1, STEP1, False), (2, STEP2, True)):
        df = pd.DataFrame(
            {
                "step": [step] * len(rows),
                "prompt": [_chat(r[0]) if chat else r[0] for r in rows],
                "completion": [_chat(r[1], "assistant") if chat else r[1] for r in rows],
                "accuracy_reward": [r[2] for r in rows],
                "format_reward": [r[3] for r in rows],
                "solution": ["42"] * len(rows),
                "advantage": [r[4] for r in rows],
            }
        )
        comp.mkdir(parents=True, exist_ok=True)
        df.to_parquet(comp / f"completions_{step:05d}.parquet")
    return root


def write_verl(root: Path) -> Path:
    """<dir>/1.jsonl and <dir>/2.jsonl; +-1 scores, an extra `acc` key; 2.jsonl has no step key,
    one malformed line, one line missing `score`, a blank line."""
    root.mkdir(parents=True, exist_ok=True)
    lines1 = [
        {"input": "P", "output": "o1", "gts": "1", "score": 1.0, "step": 1, "acc": True},
        {"input": "P", "output": "o22", "gts": "1", "score": -1.0, "step": 1, "acc": False},
        {"input": "Q", "output": "q", "gts": "2", "score": -1.0, "step": 1, "acc": True},
    ]
    (root / "1.jsonl").write_text("\n".join(json.dumps(x) for x in lines1) + "\n")
    lines2 = [
        json.dumps({"input": "Q", "output": "q1", "gts": "2", "score": 1.0, "acc": True}),
        "{not json",
        "",
        json.dumps({"input": "Q", "output": "q2", "gts": "2", "acc": True}),
        json.dumps({"input": "Q", "output": "q3", "gts": "2", "score": 1.0, "acc": False}),
    ]
    (root / "2.jsonl").write_text("\n".join(lines2) + "\n")
    return root


class WordTokenizer:
    """Fake HF-style tokenizer: one id per whitespace-separated word."""

    def encode(self, text: str, add_special_tokens: bool = True) -> list[int]:
        return [0] * (len(text.split()) + (1 if add_special_tokens else 0))


class PlainEncode:
    def encode(self, text: str) -> list[int]:
        return [0] * len(text.split())


# --------------------------------------------------------------------------- TRL


def test_trl_groups_k_G_and_schema(tmp_path):
    df, report = import_trl(write_trl(tmp_path), reward_column="accuracy_reward")
    assert tuple(df.columns) == RESPONSE_COLUMNS
    assert report.files_read == 2 and report.rows_read == 10 and report.rows_kept == 10
    assert report.skipped == {}
    s1 = df[df["step"] == 1]
    assert list(s1["prompt"]) == ["A", "B", "A", "C", "B", "A"]
    assert list(s1["group"]) == [0, 1, 0, 2, 1, 0]
    assert list(s1["k"]) == [2, 0, 2, 1, 0, 2]
    assert list(s1["G"]) == [3, 2, 3, 1, 2, 3]
    s2 = df[df["step"] == 2]
    assert list(s2["prompt"]) == ["D", "A", "D", "A"]  # message contents joined
    assert list(s2["response"]) == ["dd", "x", "ddd", "yy"]
    assert list(s2["group"]) == [0, 1, 0, 1]
    assert list(s2["k"]) == [2, 1, 2, 1]
    # a conversational prompt whose content is "A" is the same prompt as the string "A"
    assert set(df.loc[df["prompt"] == "A", "prompt_id"]) == {_pid("A")}
    assert list(df["length"]) == [len(r[1]) for r in STEP1 + STEP2]
    assert list(df["advantage"]) == [r[4] for r in STEP1 + STEP2]
    assert df["reward"].isin([0.0, 1.0]).all()
    assert (df["reward"] == df["correct"].astype(float)).all()
    assert df["difficulty"].isna().all() and df["work"].isna().all()
    assert (df["resample_round"] == 0).all()


def test_trl_several_reward_columns_need_a_choice(tmp_path):
    write_trl(tmp_path)
    with pytest.raises(ValueError) as e:
        import_trl(tmp_path)
    msg = _msg(e)
    assert "accuracy_reward" in msg and "format_reward" in msg and "advantage" not in msg


def test_trl_sum_of_reward_columns_and_threshold(tmp_path):
    write_trl(tmp_path)
    df, _ = import_trl(tmp_path / "completions", ["accuracy_reward", "format_reward"], 1.5)
    total = [r[2] + r[3] for r in STEP1 + STEP2]
    assert list(df["raw_reward"]) == total
    assert list(df["correct"]) == [t > 1.5 for t in total]
    # threshold 0.5 on the sum: a format bonus alone (1.0) counts as correct
    df, _ = import_trl(tmp_path, ["accuracy_reward", "format_reward"], 0.5)
    assert list(df["correct"]) == [t > 0.5 for t in total]


def test_trl_token_lengths(tmp_path):
    write_trl(tmp_path)
    words = [len(r[1].split()) for r in STEP1 + STEP2]
    for tok in (WordTokenizer(), PlainEncode(), lambda t: [1] * len(t.split())):
        df, _ = import_trl(tmp_path, "accuracy_reward", tokenizer=tok)
        assert list(df["length"]) == words  # WordTokenizer: special tokens not counted
    df, _ = import_trl(tmp_path, "accuracy_reward", tokenizer=lambda t: {"input_ids": [1, 2]})
    assert (df["length"] == 2).all()
    with pytest.raises(ValueError, match="tokenizer"):
        import_trl(tmp_path, "accuracy_reward", tokenizer=3)


def test_trl_unreadable_file_and_missing_column_named(tmp_path):
    write_trl(tmp_path)
    bad = tmp_path / "completions" / "completions_00003.parquet"
    bad.write_bytes(b"this is not parquet")
    with pytest.raises(ValueError) as e:
        import_trl(tmp_path, "accuracy_reward")
    assert str(bad) in _msg(e) and "cannot read" in _msg(e)
    bad.unlink()
    pd.DataFrame({"step": [3], "prompt": ["A"], "accuracy_reward": [1.0]}).to_parquet(bad)
    with pytest.raises(ValueError) as e:
        import_trl(tmp_path, "accuracy_reward")
    assert "'completion'" in _msg(e) and str(bad) in _msg(e)
    with pytest.raises(ValueError, match="'nope'"):
        import_trl(tmp_path, "nope")
    with pytest.raises(ValueError, match="not found"):
        import_trl(tmp_path / "missing")


def test_trl_malformed_rows_skipped_and_counted(tmp_path):
    comp = tmp_path / "completions"
    comp.mkdir()
    pd.DataFrame(
        {
            "step": ["1", "1", "x", "1", "1"],
            "prompt": ["A", None, "A", "A", "A"],
            "completion": ["a", "b", "c", "d", "e"],
            "reward": [1.0, 1.0, 1.0, np.nan, 0.0],
        }
    ).to_parquet(comp / "completions_00001.parquet")
    df, report = import_trl(tmp_path)  # one numeric column: it is the reward
    assert list(df["response"]) == ["a", "e"] and list(df["k"]) == [1, 1]
    assert report.skipped == {"missing_value": 2, "bad_step": 1}
    assert report.first_skipped["bad_step"].endswith("row 2")
    assert "skipped 3" in str(report) and "\n" not in str(report)


def test_all_rows_bad_names_the_first(tmp_path):
    comp = tmp_path / "completions"
    comp.mkdir()
    pd.DataFrame({"step": [1], "prompt": [7], "completion": ["a"], "r": [1.0]}).to_parquet(
        comp / "completions_00001.parquet"
    )
    with pytest.raises(ValueError) as e:
        import_trl(tmp_path)
    assert "bad_text" in _msg(e) and "completions_00001.parquet row 0" in _msg(e)


# --------------------------------------------------------------------------- verl


def test_verl_rows_steps_skips_and_pm1_threshold(tmp_path):
    df, report = import_verl(write_verl(tmp_path / "rollouts"))
    assert report.files_read == 2 and report.rows_read == 7 and report.rows_kept == 5
    assert report.skipped == {"invalid_json": 1, "missing_value": 1}
    assert report.first_skipped["invalid_json"].endswith("2.jsonl:2")
    assert report.first_skipped["missing_value"].endswith("2.jsonl:4")
    assert list(df["step"]) == [1, 1, 1, 2, 2]  # step 2 from the file name
    assert list(df["response"]) == ["o1", "o22", "q", "q1", "q3"]
    assert list(df["correct"]) == [True, False, False, True, True]  # score > 0 on +-1
    assert list(df["raw_reward"]) == [1.0, -1.0, -1.0, 1.0, 1.0]
    assert list(df["group"]) == [0, 0, 1, 0, 0]
    assert list(df["k"]) == [1, 1, 0, 2, 2] and list(df["G"]) == [2, 2, 1, 2, 2]
    assert df["advantage"].isna().all()


def test_verl_correct_column(tmp_path):
    df, report = import_verl(write_verl(tmp_path / "r"), correct_column="acc")
    # the line without `score` is usable now: correctness comes from `acc`
    assert report.skipped == {"invalid_json": 1} and len(df) == 6
    assert list(df["correct"]) == [True, False, True, True, True, False]
    assert np.isnan(df["raw_reward"].iloc[4])
    assert list(df["k"]) == [1, 1, 1, 2, 2, 2]


def test_verl_unreadable_and_missing_key(tmp_path):
    root = write_verl(tmp_path / "r")
    (root / "3.jsonl").write_bytes(b'{"input": "\xff\xfe"}\n')
    with pytest.raises(ValueError) as e:
        import_verl(root)
    assert str(root / "3.jsonl") in _msg(e)
    (root / "3.jsonl").write_text(json.dumps({"input": "Q", "output": "z"}) + "\n")
    with pytest.raises(ValueError) as e:
        import_verl(root)
    assert "'score'" in _msg(e) and "3.jsonl" in _msg(e)


# --------------------------------------------------------------------------- generic

MAPPING = {"step": "it", "prompt": "q", "response": "a", "reward": "r", "difficulty": "lvl"}


def write_csv(path: Path) -> Path:
    pd.DataFrame(
        {
            "it": [0, 0, 0, 1, 1, 1],
            "q": ["u", "v", "u", "u", "u", "v"],
            "a": ["aa", "b", "ccc", "d", "ee", "f f"],
            "r": [1, -1, 1, -1, 1, "oops"],
            "lvl": ["easy", "hard", "easy", "easy", "easy", "hard"],
        }
    ).to_csv(path, index=False)
    return path


def test_generic_csv_with_mapping(tmp_path):
    df, report = import_generic(write_csv(tmp_path / "log.csv"), MAPPING)
    assert report.skipped == {"bad_reward": 1} and report.rows_kept == 5
    assert list(df["correct"]) == [True, False, True, False, True]
    assert list(df["group"]) == [0, 1, 0, 0, 0]
    assert list(df["k"]) == [2, 0, 2, 1, 1] and list(df["G"]) == [2, 1, 2, 2, 2]
    assert list(df["difficulty"]) == ["easy", "hard", "easy", "easy", "easy"]
    assert list(df["length"]) == [2, 1, 3, 1, 2]
    # the same file through import_run, and as a directory
    df2, _ = import_run({"format": "generic", "path": str(tmp_path), "columns": MAPPING})
    pd.testing.assert_frame_equal(df, df2)


def test_generic_errors(tmp_path):
    path = write_csv(tmp_path / "log.csv")
    with pytest.raises(ValueError) as e:
        import_generic(path, {**MAPPING, "reward": "score"})
    assert "'score'" in _msg(e) and "log.csv" in _msg(e)
    with pytest.raises(ValueError, match="unknown field.*valid"):
        import_generic(path, {**MAPPING, "tokens": "n"})
    with pytest.raises(ValueError, match="missing prompt"):
        import_generic(path, {k: v for k, v in MAPPING.items() if k != "prompt"})
    with pytest.raises(ValueError, match="reward_column"):
        import_generic(path, MAPPING, reward_column="other")
    with pytest.raises(ValueError, match="file not found"):
        import_generic(tmp_path / "nope.csv", MAPPING)


def test_generic_jsonl_correct_only(tmp_path):
    rows = [
        {"s": 0, "p": "u", "o": "x", "ok": 1},
        {"s": 0, "p": "u", "o": "y", "ok": 0},
        {"s": 0, "p": "u", "o": "z", "ok": "maybe"},
    ]
    path = tmp_path / "log.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows))
    cols = {"step": "s", "prompt": "p", "response": "o", "correct": "ok"}
    df, report = import_generic(path, cols)
    assert list(df["correct"]) == [True, False] and df["raw_reward"].isna().all()
    assert report.skipped == {"bad_correct": 1}


@settings(max_examples=40, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(0, 3), st.sampled_from("abcd"), st.sampled_from([-1.0, 0.0, 1.0])),
        min_size=1,
        max_size=30,
    )
)
def test_groups_match_loop_reference(rows):
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "log.parquet"
        pd.DataFrame(rows, columns=["step", "prompt", "r"]).assign(out="o").to_parquet(path)
        cols = {"step": "step", "prompt": "prompt", "response": "out", "reward": "r"}
        df, _ = import_generic(path, cols)
    order = sorted(range(len(rows)), key=lambda i: rows[i][0])  # stable sort by step
    for pos, i in enumerate(order):
        step, prompt, r = rows[i]
        same_step = [rows[j] for j in order if rows[j][0] == step]
        firsts = list(dict.fromkeys(p for _, p, _ in same_step))
        group = [x for x in same_step if x[1] == prompt]
        got = df.iloc[pos]
        assert got["prompt"] == prompt and got["correct"] == (r > 0)
        assert got["group"] == firsts.index(prompt)
        assert got["G"] == len(group) and got["k"] == sum(x[2] > 0 for x in group)


# --------------------------------------------------------------------------- import_run


def test_import_run_dispatch_and_errors(tmp_path):
    write_trl(tmp_path / "trl")
    df, report = import_run(
        {"format": "trl", "path": tmp_path / "trl", "reward_column": "accuracy_reward"}
    )
    assert isinstance(report, ImportReport) and len(df) == 10
    df, _ = import_run({"format": "verl", "path": write_verl(tmp_path / "v"), "threshold": "0"})
    assert len(df) == 5
    with pytest.raises(ValueError, match="valid: trl, verl, generic"):
        import_run({"format": "openrlhf", "path": "x"})
    with pytest.raises(ValueError) as e:
        import_run({"format": "trl", "path": "x", "columns": {}})
    assert "columns" in _msg(e) and "valid: format, path, reward_column" in _msg(e)
    with pytest.raises(ValueError, match="needs 'path'"):
        import_run({"format": "verl"})
    with pytest.raises(ValueError, match="needs 'columns'"):
        import_run({"format": "generic", "path": "x"})
    with pytest.raises(ValueError, match="tokenizer path not found"):
        import_run({"format": "verl", "path": tmp_path / "v", "tokenizer": tmp_path / "none"})
    with pytest.raises(ValueError, match="needs a 'format'"):
        import_run({"path": "x"})


def test_correct_rule_is_frozen():
    rule = CorrectRule(threshold=0.5)
    with pytest.raises(AttributeError):
        rule.threshold = 1.0  # type: ignore[misc]


def test_correct_rule_threshold_checked():
    assert CorrectRule(threshold="0.5").threshold == 0.5
    with pytest.raises(ValueError, match="threshold must be a number"):
        CorrectRule(threshold="high")
    with pytest.raises(ValueError, match="NaN"):
        import_verl("unused", threshold=float("nan"))


def test_import_run_loads_a_local_tokenizer(tmp_path):
    """A real saved HF tokenizer (the project's char tokenizer: one token per character, <bos>
    prepended by default): lengths count characters, special tokens left out."""
    from grpo_dial.policy.model import build_char_tokenizer

    build_char_tokenizer("PQoq0123").save_pretrained(tmp_path / "tok")
    spec = {"format": "verl", "path": write_verl(tmp_path / "v"), "tokenizer": tmp_path / "tok"}
    df, _ = import_run(spec)
    assert list(df["length"]) == [len(r) for r in df["response"]]
    df2, _ = import_run({**spec, "tokenizer": WordTokenizer()})  # an object passes through
    assert (df2["length"] == 1).all()


def test_every_runs_key_the_schema_allows_reaches_an_importer():
    import inspect

    import yaml

    from grpo_dial.external.importers import IMPORTERS

    schema = Path(__file__).parents[2] / "workflow" / "schemas" / "config.schema.yaml"
    runs = yaml.safe_load(schema.read_text())["properties"]["runs"]["additionalProperties"]
    keys = set(runs["properties"]) - {"format", "path", "optional"}  # optional: workflow only
    accepted = {k for f in IMPORTERS.values() for k in inspect.signature(f).parameters}
    assert keys <= accepted, keys - accepted
    assert "eval_steps" in inspect.signature(IMPORTERS["trl"]).parameters


def test_verl_nested_and_overflowing_lines_are_skipped_and_counted(tmp_path):
    # a line nested past the parser's recursion limit is invalid_json (no RecursionError); a
    # step of 1e30 (or 2^53 + 2, which a float cannot tell from its neighbours) is bad_step,
    # not an int64 wrapped to a negative number that sorts first
    rows = [{"input": "p", "output": f"o{i}", "score": float(i % 2), "step": 3} for i in range(4)]
    lines = [json.dumps(r) for r in rows]
    lines.insert(1, "[" * 100_000 + "]" * 100_000)
    lines.insert(2, json.dumps({"input": "p", "output": "x", "score": 1.0, "step": 1e30}))
    lines.insert(3, json.dumps({"input": "p", "output": "y", "score": 1.0, "step": 2**53 + 2}))
    folder = tmp_path / "r"
    folder.mkdir()
    (folder / "3.jsonl").write_text("\n".join(lines) + "\n")
    df, report = import_verl(folder)
    assert report.skipped == {"invalid_json": 1, "bad_step": 2}
    assert report.first_skipped["invalid_json"].endswith("3.jsonl:2")
    assert report.first_skipped["bad_step"].endswith("3.jsonl:3")
    assert list(df["step"]) == [3, 3, 3, 3] and list(df["response"]) == ["o0", "o1", "o2", "o3"]

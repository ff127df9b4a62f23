"""Tests for grpo_dial.external.log_files: readers count what they skip, cleaners never guess."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from grpo_dial.external.log_files import (
    ImportReport,
    as_bool,
    as_text,
    read_file,
    require,
    step_order,
    token_counter,
)


def test_jsonl_keeps_objects_and_counts_every_other_line(tmp_path):
    path = tmp_path / "3.jsonl"
    lines = [json.dumps({"a": 1}), "", "not json", json.dumps([1, 2]), json.dumps({"a": 2})]
    path.write_text("\n".join(lines) + "\n")
    report = ImportReport()
    df = read_file(path, report)
    assert df["a"].tolist() == [1, 2]
    assert df["_loc"].tolist() == [f"{path}:1", f"{path}:5"]
    assert (report.files_read, report.rows_read) == (1, 4)  # the blank line is not a row
    assert report.skipped == {"invalid_json": 2}
    assert report.first_skipped["invalid_json"] == f"{path}:3"


@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
def test_tables_carry_file_and_row(tmp_path, suffix):
    path = tmp_path / f"completions_7{suffix}"
    frame = pd.DataFrame({"prompt": ["x", "y"], "reward": [1.0, 0.0]})
    frame.to_csv(path, index=False) if suffix == ".csv" else frame.to_parquet(path)
    report = ImportReport()
    df = read_file(path, report)
    assert df["_loc"].tolist() == [f"{path} row 0", f"{path} row 1"]
    assert report.rows_read == 2 and report.files_read == 1


def test_unreadable_files_fail_with_one_line_naming_the_file(tmp_path):
    path = tmp_path / "broken.parquet"
    path.write_bytes(b"not a parquet file at all")
    with pytest.raises(ValueError, match=r"^cannot read .*broken\.parquet: [^\n]+$"):
        read_file(path, ImportReport())
    bad = tmp_path / "latin.jsonl"
    bad.write_bytes(b'{"a": "\xff"}\n')
    with pytest.raises(ValueError, match="cannot read .*latin.jsonl"):
        read_file(bad, ImportReport())


def test_require_names_the_missing_column_its_role_and_what_the_file_has(tmp_path):
    df = pd.DataFrame({"prompt": ["x"], "_loc": ["f row 0"]})
    require(df, tmp_path / "f.csv", {"prompt": "the prompt"})
    with pytest.raises(ValueError, match=r"lacks column 'reward' \(the reward\); it has: prompt$"):
        require(df, tmp_path / "f.csv", {"reward": "the reward"})


def test_step_order_is_numeric_not_lexical(tmp_path):
    names = ["completions_10.parquet", "completions_9.parquet", "completions_100.parquet", "x.csv"]
    ordered = sorted((tmp_path / n for n in names), key=step_order)
    assert [p.name for p in ordered] == [
        "x.csv",
        "completions_9.parquet",
        "completions_10.parquet",
        "completions_100.parquet",
    ]


def test_as_text_joins_message_contents_and_refuses_what_it_cannot_read():
    assert as_text("plain") == "plain"
    assert as_text([{"role": "assistant", "content": "a"}, {"content": "b"}]) == "a\nb"
    assert as_text({"content": [{"type": "text", "text": "x"}, {"text": "y"}]}) == "xy"
    assert as_text(np.array([{"content": "z"}], dtype=object)) == "z"
    assert as_text([{"content": None}]) == ""  # TRL >= 1.15: a turn that only calls a tool
    assert as_text([{"content": 3}]) is None and as_text(["text"]) is None
    assert as_text(3) is None


def test_as_bool_accepts_only_unambiguous_values():
    assert [as_bool(v) for v in (True, np.bool_(False), 1, 0.0, " TRUE ", "0")] == [
        True,
        False,
        True,
        False,
        True,
        False,
    ]
    assert [as_bool(v) for v in (2, 0.5, "yes", None, float("nan"))] == [None] * 5


def test_token_counter_uses_encode_without_special_tokens_or_the_call():
    class Encoder:
        def encode(self, text, add_special_tokens=True):
            return list(text) + (["<s>"] if add_special_tokens else [])

    class OldEncoder:
        def encode(self, text):
            return text.split()

    assert token_counter(Encoder())("abc") == 3
    assert token_counter(OldEncoder())("a b c d") == 4
    assert token_counter(lambda t: {"input_ids": [0] * len(t)})("ab") == 2
    with pytest.raises(ValueError, match="encode method or be callable, got int"):
        token_counter(5)


def test_report_says_what_was_kept_and_why_rows_were_skipped():
    report = ImportReport(files_read=2, rows_read=10, rows_kept=7, source="trl")
    report.skip("bad_text", 2, "a.parquet row 3")
    report.skip("bad_text", 1, "b.parquet row 0")
    report.skip("nothing", 0, "never")
    assert report.skipped == {"bad_text": 3}
    assert str(report) == (
        "trl: 2 file(s), read 10 rows, kept 7, skipped 3 (bad_text: 3 (first a.parquet row 3))"
    )

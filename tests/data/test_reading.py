"""Shared file reading: JSON lines with line numbers, counted drops, the three file formats."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from grpo_dial.data.reading import LoadReport, read_jsonl, read_rows, require_file, row_error


def test_jsonl_lines_numbered_blank_lines_skipped_bad_lines_counted(tmp_path: Path) -> None:
    path = tmp_path / "x.jsonl"
    path.write_text('{"a": 1}\n\n{not json\n[1, 2]\n{"a": "\u2028"}\n', encoding="utf-8")
    report = LoadReport(name="x")
    rows = read_jsonl(path, report)
    assert rows == [(1, {"a": 1}), (5, {"a": "\u2028"})]  # U+2028 inside a string is no break
    assert report.n_read == 4 and report.dropped == {"invalid_json": 2}
    assert [m.split(": ")[1] for m in report.skipped] == ["line 3", "line 4"]
    assert all(m.startswith(str(path)) and "\n" not in m for m in report.skipped)


def test_report_counts_and_text() -> None:
    report = LoadReport(name="src", n_read=5, n_kept=2)
    report.drop("a", 2)
    report.drop("b", 0)
    report.skip("a", "row 4 bad")
    assert report.dropped == {"a": 3} and report.n_dropped == 3 and report.skipped == ["row 4 bad"]
    assert str(report) == "src: read 5, kept 2, dropped 3 (a: 3)"


def test_read_rows_formats_agree(tmp_path: Path) -> None:
    rows = [{"p": "x", "q": 1}, {"p": "y", "q": 2}]
    (tmp_path / "r.jsonl").write_text("\n".join(json.dumps(r) for r in rows))
    (tmp_path / "r.json").write_text(json.dumps(rows + [3]))
    pd.DataFrame(rows).to_parquet(tmp_path / "r.parquet")
    frames = {}
    for suffix in ("jsonl", "json", "parquet"):
        report = LoadReport(name=suffix)
        frames[suffix] = read_rows(tmp_path / f"r.{suffix}", report)
        assert report.n_read == (3 if suffix == "json" else 2)
    for df in frames.values():
        pd.testing.assert_frame_equal(df, frames["jsonl"])
    with pytest.raises(ValueError, match="unsupported file type '.csv'"):
        read_rows(tmp_path / "r.csv", LoadReport(name="csv"))


def test_errors_are_one_line() -> None:
    assert str(row_error("f.jsonl", 3, "score", "bad")) == "f.jsonl: line 3: column 'score': bad"
    with pytest.raises(ValueError, match="file not found: nowhere.jsonl"):
        require_file("nowhere.jsonl")

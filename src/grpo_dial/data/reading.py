"""Reading raw data files once, with a count of what was read, kept and dropped.

Every reader of a raw source returns its rows and a LoadReport. A row the source's validator
rejects is dropped under one reason and its one-line message (naming file, line and column) is
kept in `report.skipped`, so every consumer of a source drops the same rows for the same reason.

JSON lines: a line is a line of the file ("\n"); blank lines are neither read nor counted; a line
that is not a JSON object is dropped as invalid_json. Line numbers count from 1 and include blank
lines, so a message points at the line an editor shows.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from grpo_dial.data.sources import DATA_SUFFIXES, missing_path

INVALID_JSON = "invalid_json"
MALFORMED = "malformed"
# The long table a logged-response source (GSM8K solutions, math_cot_100) is read into: one row
# per response, problems in file order and each problem's responses in the source's order.
# difficulty is the source's own label ("level 3") or NA; line is the problem's line in the file.
LOGGED_COLUMNS = ("prompt_id", "line", "difficulty", "model", "correct", "response")


@dataclass
class LoadReport:
    """What a loader read, kept and dropped (reason -> row count; 0-count reasons omitted)."""

    name: str
    n_read: int = 0
    n_kept: int = 0
    dropped: dict[str, int] = field(default_factory=dict)
    skipped: list[str] = field(default_factory=list)  # one line per row a validator rejected

    @property
    def n_dropped(self) -> int:
        return sum(self.dropped.values())

    def drop(self, reason: str, count: int) -> None:
        if count:
            self.dropped[reason] = self.dropped.get(reason, 0) + int(count)

    def skip(self, reason: str, message: str) -> None:
        """Drop one row under `reason` and keep the message saying where and why."""
        self.drop(reason, 1)
        self.skipped.append(message)

    def __str__(self) -> str:
        why = ", ".join(f"{r}: {c}" for r, c in self.dropped.items()) or "none"
        return (
            f"{self.name}: read {self.n_read}, kept {self.n_kept}, dropped {self.n_dropped} ({why})"
        )


def row_error(path: str | Path, line: int, column: str, what: str) -> ValueError:
    """The one-line error a validator raises for a bad row: file, line, column, what is wrong."""
    return ValueError(f"{path}: line {line}: column {column!r}: {what}")


def one_line(exc: BaseException) -> str:
    """An exception as one short line: its type and the first line of its message."""
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0][:200] if text else ''}"


def require_file(path: str | Path) -> Path:
    """`path` when it is a local file; else one line naming it (never a hub or URL lookup)."""
    if not Path(path).is_file():
        raise ValueError(missing_path(path, "file"))
    return Path(path)


def read_jsonl(path: Path, report: LoadReport) -> list[tuple[int, dict]]:
    """(line number, object) of every JSON-object line; sets report.n_read (non-blank lines)."""
    rows, n_read = [], 0
    for number, text in enumerate(path.read_text(encoding="utf-8").split("\n"), start=1):
        if not text.strip():
            continue
        n_read += 1
        try:
            obj = json.loads(text)
        except json.JSONDecodeError as err:
            report.skip(INVALID_JSON, f"{path}: line {number}: not JSON ({err.msg})")
            continue
        if not isinstance(obj, dict):
            report.skip(INVALID_JSON, f"{path}: line {number}: not a JSON object")
            continue
        rows.append((number, obj))
    report.n_read = n_read
    return rows


def read_valid_jsonl(
    path: Path, report: LoadReport, check: Callable[[dict, Path, int], None]
) -> list[tuple[int, dict]]:
    """(line number, object) of the JSON-object lines that pass `check(row, path, line)`; a row it
    rejects is counted as MALFORMED with its one-line message."""
    good = []
    for line, row in read_jsonl(path, report):
        try:
            check(row, path, line)
        except ValueError as err:
            report.skip(MALFORMED, str(err))
            continue
        good.append((line, row))
    return good


def read_rows(path: Path, report: LoadReport) -> pd.DataFrame:
    """Rows of a .jsonl, .json (array or JSON lines) or .parquet file as a DataFrame."""
    suffix = path.suffix.lower()
    if suffix == ".parquet":
        df = pd.read_parquet(path)
        report.n_read = len(df)
        return df
    if suffix == ".json":
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except json.JSONDecodeError:
            data = None  # JSON lines under a .json name
        if isinstance(data, list):
            rows = [r for r in data if isinstance(r, dict)]
            report.n_read = len(data)
            report.drop(INVALID_JSON, len(data) - len(rows))
            return pd.DataFrame(rows)
    elif suffix not in DATA_SUFFIXES:
        raise ValueError(f"unsupported file type {path.suffix!r} (use .jsonl, .json or .parquet)")
    return pd.DataFrame([row for _, row in read_jsonl(path, report)])

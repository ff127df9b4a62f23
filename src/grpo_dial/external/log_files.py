"""Reading rollout log files (JSON lines, CSV, parquet) into frames, and cleaning their values.

The file-level half of `grpo_dial.external.importers`: every reader counts what it skips in an
`ImportReport` and names the file it cannot read. Values are only parsed, never evaluated.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

TABLE_SUFFIXES = (".csv", ".parquet", ".jsonl", ".json")


@dataclass
class ImportReport:
    """What an importer read and kept; skipped = reason -> rows, first_skipped = reason -> where,
    notes = how it read them (the correctness rule, the group size, what the length counts)."""

    files_read: int = 0
    rows_read: int = 0
    rows_kept: int = 0
    skipped: dict[str, int] = field(default_factory=dict)
    source: str = ""
    first_skipped: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)  # what was read how (rule, eval steps, ...)

    def skip(self, reason: str, count: int, where: str) -> None:
        if count:
            self.skipped[reason] = self.skipped.get(reason, 0) + int(count)
            self.first_skipped.setdefault(reason, where)

    def __str__(self) -> str:
        why = "; ".join(
            f"{r}: {c} (first {self.first_skipped.get(r, '?')})" for r, c in self.skipped.items()
        )
        n = sum(self.skipped.values())
        return (
            f"{self.source or 'import'}: {self.files_read} file(s), read {self.rows_read} rows, "
            f"kept {self.rows_kept}, skipped {n}"
            + (f" ({why})" if why else "")
            + "".join(f"; {note}" for note in self.notes)
        )


# --------------------------------------------------------------------------- reading


def unreadable(path: Path, err: Exception) -> ValueError:
    msg = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
    return ValueError(f"cannot read {path}: {msg}")


def read_jsonl(path: Path, report: ImportReport) -> pd.DataFrame:
    """One row per JSON-object line (blank lines ignored); other lines, and lines nested too
    deep for the parser, skipped as invalid_json."""
    try:
        text = path.read_bytes().decode("utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise unreadable(path, err) from None
    rows, locs = [], []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        report.rows_read += 1
        try:
            obj = json.loads(line)
        except (json.JSONDecodeError, RecursionError):  # RecursionError: nested too deep
            obj = None
        if isinstance(obj, dict):
            rows.append(obj)
            locs.append(f"{path}:{number}")
        else:
            report.skip("invalid_json", 1, f"{path}:{number}")
    df = pd.DataFrame.from_records(rows) if rows else pd.DataFrame(index=range(0))
    df["_loc"] = locs
    return df


def read_file(path: Path, report: ImportReport) -> pd.DataFrame:
    """A CSV, parquet or JSON-lines file as a DataFrame with a `_loc` column (file and row)."""
    report.files_read += 1
    if path.suffix in (".jsonl", ".json"):
        return read_jsonl(path, report)
    try:
        df = pd.read_parquet(path) if path.suffix == ".parquet" else pd.read_csv(path)
    except Exception as err:  # pyarrow / the CSV parser raise many types; all mean "unreadable"
        raise unreadable(path, err) from None
    report.rows_read += len(df)
    df = df.reset_index(drop=True)
    df["_loc"] = [f"{path} row {i}" for i in range(len(df))]
    return df


def require(df: pd.DataFrame, path: Path, needed: Mapping[str, str]) -> None:
    """needed: file column -> what it is for; raise on the first one the file lacks."""
    for col, role in needed.items():
        if col not in df.columns:
            have = ", ".join(c for c in df.columns if c != "_loc") or "none"
            raise ValueError(f"{path} lacks column {col!r} ({role}); it has: {have}")


def step_order(path: Path) -> tuple[int, str]:
    digits = re.findall(r"\d+", path.stem)
    return (int(digits[-1]) if digits else -1, str(path))


# --------------------------------------------------------------------------- cleaning


REASONING_KEYS = ("reasoning_content", "reasoning", "thinking")  # where chat parsers put it


def _content(content: object) -> str | None:
    """A message's content as text: a string, a list of parts (their "text"), None -> ""."""
    if content is None:  # TRL >= 1.15: an assistant turn that only calls a tool
        return ""
    if isinstance(content, list | tuple | np.ndarray):
        return "".join((p.get("text") or "") for p in content if isinstance(p, dict))
    return content if isinstance(content, str) else None


def _tool_calls(calls: object) -> str:
    """Tool calls as the JSON the model wrote ({"name", "arguments"}; null arguments dropped)."""
    if not isinstance(calls, list | tuple | np.ndarray):
        return ""
    parts = []
    for call in calls:
        fn = call.get("function", call) if isinstance(call, dict) else None
        if not isinstance(fn, dict):
            continue
        args = fn.get("arguments")
        if isinstance(args, dict):  # parquet fills other tools' argument names with None
            args = {k: v for k, v in args.items() if v is not None}
        parts.append(json.dumps({"name": fn.get("name"), "arguments": args}, default=str))
    return "\n".join(parts)


def _messages(value: object) -> list | None:
    if isinstance(value, dict):
        return [value]
    if isinstance(value, list | tuple | np.ndarray):
        return list(value)
    return None


def as_text(value: object) -> str | None:
    """A string as is; a message list -> contents joined by newlines (null content = "");
    anything else None. For prompts, whose text only names the prompt."""
    if isinstance(value, str):
        return value
    messages = _messages(value)
    if messages is None or not all(isinstance(m, dict) for m in messages):
        return None
    parts = [_content(m.get("content")) for m in messages]
    return None if any(p is None for p in parts) else "\n".join(parts)


def generated_text(value: object) -> str | None:
    """What the policy generated: a string as is; a message list -> per message other than
    role "tool" its reasoning text, content and tool calls, joined by newlines. Tool outputs
    (role "tool") are left out: the tool wrote them, and TRL masks them out of the loss."""
    if isinstance(value, str):
        return value
    messages = _messages(value)
    if messages is None or not all(isinstance(m, dict) for m in messages):
        return None
    parts = []
    for m in messages:
        if m.get("role") == "tool":
            continue
        content = _content(m.get("content"))
        if content is None:
            return None
        reasoning = [m[k] for k in REASONING_KEYS if isinstance(m.get(k), str) and m[k]]
        parts += [*reasoning, content] + (
            [calls] if (calls := _tool_calls(m.get("tool_calls"))) else []
        )
    return "\n".join(p for p in parts if p)


def tool_outputs(value: object) -> int:
    """Messages of role "tool" in a conversational value (0 for text)."""
    messages = _messages(value) if not isinstance(value, str) else None
    return sum(isinstance(m, dict) and m.get("role") == "tool" for m in messages or ())


def as_bool(value: object) -> bool | None:
    if isinstance(value, bool | np.bool_):
        return bool(value)
    if isinstance(value, int | float | np.integer | np.floating) and value in (0, 1):
        return bool(value)
    if isinstance(value, str) and value.strip().lower() in ("true", "false", "1", "0"):
        return value.strip().lower() in ("true", "1")
    return None


def token_counter(tokenizer: object) -> Callable[[str], int]:
    """len(ids) of a text: tokenizer.encode (no special tokens where supported) or tokenizer(t)."""
    if hasattr(tokenizer, "encode"):

        def count(text: str) -> int:
            try:
                return len(tokenizer.encode(text, add_special_tokens=False))
            except TypeError:  # an encode without that keyword
                return len(tokenizer.encode(text))

        return count
    if not callable(tokenizer):
        kind = type(tokenizer).__name__
        raise ValueError(f"tokenizer must have an encode method or be callable, got {kind}")

    def count_call(text: str) -> int:
        ids = tokenizer(text)  # a HF tokenizer's __call__ gives a mapping with input_ids
        return len(ids["input_ids"] if isinstance(ids, Mapping) else ids)

    return count_call

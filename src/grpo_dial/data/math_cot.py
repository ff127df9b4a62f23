"""math_cot_100 (Qwen2.5-Math evaluation data): 100 MATH problems, 8 scored responses each.

Each line: `question`, `answer`, `level` ("Level N"), `response` (list of texts), `score` (list
of bools, one per response), `pred`, ... A row is kept only if `question` is a string, `level`
is "Level 1".."Level 5", `response` a non-empty list of strings and `score` a list of bools of
the same length; anything else is dropped as "malformed" with a message naming file, line and
column. The pass-rate table (k = sum(score) of n = len(score)) and the real-length response
table both read the file through `read_math_cot`. prompt_id uses the "math" prefix, so a
problem that is also in MATH-500 has the same id in both.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd

from grpo_dial.data.ids import PREFIX, problem_ids
from grpo_dial.data.reading import (
    LOGGED_COLUMNS,
    LoadReport,
    read_valid_jsonl,
    require_file,
    row_error,
)

MATH_COT_MODEL = "qwen2.5-math"
_LEVEL = re.compile(r"level\s*([1-5])\s*", flags=re.IGNORECASE)


def level_label(value: object) -> str | None:
    """ "Level 3" -> "level 3"; None unless a string naming a MATH level 1-5."""
    m = _LEVEL.fullmatch(value.strip()) if isinstance(value, str) else None
    return f"level {m.group(1)}" if m else None


def _list_of(x: object, kind: type) -> bool:
    return isinstance(x, list) and len(x) > 0 and all(isinstance(v, kind) for v in x)


def check_math_cot_row(row: dict, path: str | Path, line: int) -> None:
    """Raise row_error for the first bad column of one math_cot_100 row."""
    if not isinstance(row.get("question"), str):
        raise row_error(path, line, "question", "missing or not a string")
    if level_label(row.get("level")) is None:
        raise row_error(path, line, "level", f"{row.get('level')!r} is not 'Level 1'..'Level 5'")
    response, score = row.get("response"), row.get("score")
    if not _list_of(response, str):
        raise row_error(path, line, "response", "not a non-empty list of strings")
    if not _list_of(score, bool):
        raise row_error(path, line, "score", "not a non-empty list of bools")
    if len(score) != len(response):
        raise row_error(path, line, "score", f"{len(score)} scores for {len(response)} responses")


def read_math_cot(path: str | Path) -> tuple[pd.DataFrame, LoadReport]:
    """math_cot_100.jsonl as reading.LOGGED_COLUMNS: one row per scored response, difficulty
    "level N", model MATH_COT_MODEL, prompt_id "math-..." (data/ids.py)."""
    path = require_file(path)
    report = LoadReport(name=f"math_cot:{path}")
    good = read_valid_jsonl(path, report, check_math_cot_row)
    if not good:  # an empty or cut file would give empty tables and fail a later rule obscurely
        raise ValueError(f"{path}: no usable row ({report}); is the file empty or cut short?")
    ids = problem_ids((row["question"] for _, row in good), PREFIX["math_cot"])
    sizes = [len(row["score"]) for _, row in good]
    responses = pd.DataFrame(
        {
            "prompt_id": np.repeat(ids, sizes),
            "line": np.repeat(np.array([line for line, _ in good], dtype=np.int64), sizes),
            "difficulty": np.repeat(
                np.array([level_label(row["level"]) for _, row in good], dtype=object), sizes
            ),
            "model": MATH_COT_MODEL,
            "correct": np.array([s for _, row in good for s in row["score"]], dtype=bool),
            "response": [t for _, row in good for t in row["response"]],
        },
        columns=list(LOGGED_COLUMNS),
    )
    report.n_kept = len(good)
    return responses, report

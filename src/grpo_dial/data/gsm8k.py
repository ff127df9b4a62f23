"""GSM8K: the problems (train / test) and the logged model solutions of the test set.

Problems (`train.jsonl`, `test.jsonl`): `question`, `answer` = worked solution ending
"#### <number>". reference = the text after the last "####", commas removed; solution = the text
before it without the calculator annotations "<<16-3-4=9>>".

Logged solutions (`example_model_solutions.jsonl`): per test problem `question`, `ground_truth`
and 4 objects GSM8K_MODELS (GPT-3 6B / 175B, finetuned / verifier-selected), each
{is_correct: bool, solution: str}. A row is kept only if `question` is a string and every model
object carries a bool `is_correct` and a string `solution`; anything else is dropped as
"malformed" with a message naming file, line and column. The pass-rate table (k of 4 correct)
and the real-length response table both read this file through `read_gsm8k_solutions`.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd

from grpo_dial.data.ids import PREFIX, problem_ids
from grpo_dial.data.prompt_table import empty_adapted, require_columns, stripped
from grpo_dial.data.reading import (
    LOGGED_COLUMNS,
    LoadReport,
    read_valid_jsonl,
    require_file,
    row_error,
)

GSM8K_MODELS = ("6b_finetuning", "6b_verification", "175b_finetuning", "175b_verification")
_CALCULATOR = re.compile(r"<<[^<>]*>>")  # GSM8K's calculator annotations "<<16-3-4=9>>"


# --------------------------------------------------------------------------- problems


def gsm8k_problems(df: pd.DataFrame) -> tuple[pd.DataFrame, np.ndarray]:
    """GSM8K question/answer rows as prompt-table rows (prompt_table.ADAPTED_COLUMNS); every row
    passes (GSM8K has no filters)."""
    require_columns(df, ("question", "answer"), "gsm8k")
    if not len(df):
        return empty_adapted(), np.zeros(0, bool)
    answer = df["answer"].map(lambda v: v if isinstance(v, str) else "")
    head, _, tail = answer.str.rpartition("####").T.to_numpy()  # (3, N)
    has_marker = answer.str.contains("####", regex=False).to_numpy()
    reference = pd.Series(np.where(has_marker, tail, ""), dtype=object).str.replace(",", "")
    solution = pd.Series(head, dtype=object).map(lambda s: _CALCULATOR.sub("", s).strip())
    out = pd.DataFrame(
        {
            "problem": stripped(df["question"]),
            "reference": reference.str.strip(),
            "source": "gsm8k",
            "difficulty": "gsm8k",
            "prior_pass_rate": np.nan,
            "solution": solution.where(solution != "", None),
            "id_text": df["question"],
        }
    )
    return out, np.ones(len(df), bool)


# --------------------------------------------------------------------------- logged solutions


def check_solutions_row(row: dict, path: str | Path, line: int) -> None:
    """Raise row_error for the first bad column of one example_model_solutions row."""
    if not isinstance(row.get("question"), str):
        raise row_error(path, line, "question", "missing or not a string")
    for model in GSM8K_MODELS:
        obj = row.get(model)
        if not isinstance(obj, dict):
            raise row_error(path, line, model, "missing or not an object")
        if not isinstance(obj.get("is_correct"), bool):
            got = obj.get("is_correct")
            raise row_error(path, line, model, f"is_correct must be a bool, got {got!r}")
        if not isinstance(obj.get("solution"), str):
            raise row_error(path, line, model, "solution must be a string")


def read_gsm8k_solutions(path: str | Path) -> tuple[pd.DataFrame, LoadReport]:
    """example_model_solutions.jsonl as reading.LOGGED_COLUMNS: 4 rows per kept problem (model
    order GSM8K_MODELS), response = the solution text, difficulty NA; prompt_id by data/ids.py
    ("gsm8k-...", the same id as the problem's in GSM8K test)."""
    path = require_file(path)
    report = LoadReport(name=f"gsm8k_solutions:{path}")
    good = read_valid_jsonl(path, report, check_solutions_row)
    if not good:  # an empty or cut file would give empty tables and fail a later rule obscurely
        raise ValueError(f"{path}: no usable row ({report}); is the file empty or cut short?")
    ids = problem_ids((row["question"] for _, row in good), PREFIX["gsm8k"])
    m = len(GSM8K_MODELS)
    responses = pd.DataFrame(
        {
            "prompt_id": np.repeat(ids, m),
            "line": np.repeat(np.array([line for line, _ in good], dtype=np.int64), m),
            "difficulty": pd.NA,
            "model": np.tile(np.array(GSM8K_MODELS, dtype=object), len(good)),
            "correct": np.array([r[x]["is_correct"] for _, r in good for x in GSM8K_MODELS], bool),
            "response": [r[x]["solution"] for _, r in good for x in GSM8K_MODELS],
        },
        columns=list(LOGGED_COLUMNS),
    )
    report.n_kept = len(good)
    return responses, report

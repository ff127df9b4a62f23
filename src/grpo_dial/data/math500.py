"""MATH-500 (HuggingFaceH4/MATH-500): 500 MATH problems with difficulty levels 1-5.

Fields: `problem`, `solution`, `answer`, `subject`, `level` (int, or "Level N" in other copies
of MATH), `unique_id`. Rows become prompt-table rows: reference = `answer`, difficulty =
"level<N>" ("unknown" when the level has no digit), solution = `solution`. Filters: `levels`
(ints 1-5) and `subjects`. prompt_id uses the "math" prefix (data/ids.py), the same as
math_cot_100's, since both hold MATH problems.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from grpo_dial.data.prompt_table import empty_adapted, present, require_columns, stripped


def level_numbers(level: pd.Series) -> pd.Series:
    """(N,) float: the first integer in each level ("Level 3" and 3 alike), NaN if none."""
    return pd.to_numeric(level.astype(str).str.extract(r"(\d+)", expand=False), errors="coerce")


def math500_problems(
    df: pd.DataFrame,
    levels: Sequence[int] | None = None,
    subjects: Sequence[str] | None = None,
) -> tuple[pd.DataFrame, np.ndarray]:
    """MATH problem/answer/level/subject/solution rows as prompt-table rows
    (prompt_table.ADAPTED_COLUMNS) and which rows pass the level and subject filters."""
    require_columns(df, ("problem", "answer", "level"), "math500")
    if not len(df):
        return empty_adapted(), np.zeros(0, bool)
    level = level_numbers(df["level"])  # (N,)
    solution = df["solution"] if "solution" in df.columns else pd.Series([None] * len(df))
    out = pd.DataFrame(
        {
            "problem": stripped(df["problem"]),
            "reference": stripped(df["answer"]),
            "source": "math500",
            "difficulty": [f"level{int(v)}" if v == v else "unknown" for v in level],
            "prior_pass_rate": np.nan,
            "solution": stripped(solution).where(present(stripped(solution)), None),
            "id_text": df["problem"],
        }
    )
    keep = np.ones(len(df), bool)
    if levels is not None:
        keep &= level.isin(list(levels)).to_numpy()
    if subjects is not None:
        require_columns(df, ("subject",), "math500")
        keep &= df["subject"].isin(list(subjects)).to_numpy()
    return out, keep

"""The math prompt table every math source is adapted into, and its validation.

One row per problem:

    prompt_id        str    the data/ids.py rule on the problem text as the source gives it:
                            gsm8k-, math- (MATH-500), bigmath-; the pass-rate tables use the same
    problem          str    the problem statement, surrounding whitespace stripped
    reference        str    the final answer (GSM8K: text after "####", commas removed)
    source           str    "gsm8k", "math500", or Big-Math's own `source` column
    difficulty       str    "gsm8k"; "level1".."level5" (MATH); Big-Math: the solve-rate band
                            of BIGMATH_BANDS holding llama8b_solve_rate ("sr0.2-0.4"), "unknown"
    prior_pass_rate  float  Big-Math's llama8b_solve_rate, NaN where unknown
    solution         str/NA the dataset's worked solution (GSM8K's text before "####", MATH's
                            `solution`); NA for Big-Math

An adapter (gsm8k.py, math500.py, bigmath.py) returns ADAPTED_COLUMNS: the table without
prompt_id, plus `id_text`, the unstripped problem text the id is hashed from.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

MATH_COLUMNS = tuple(
    "prompt_id problem reference source difficulty prior_pass_rate solution".split()
)
ADAPTED_COLUMNS = (*MATH_COLUMNS[1:], "id_text")


def empty_adapted() -> pd.DataFrame:
    return pd.DataFrame({c: pd.Series(dtype=object) for c in ADAPTED_COLUMNS})


def stripped(values: pd.Series) -> pd.Series:
    """Strings stripped of surrounding whitespace; anything else (null, numbers) as is."""
    return values.map(lambda v: v.strip() if isinstance(v, str) else v)


def present(values: pd.Series) -> np.ndarray:
    """(N,) bool: a non-empty string."""
    return values.map(lambda v: isinstance(v, str) and v != "").to_numpy(dtype=bool)


def require_columns(df: pd.DataFrame, columns: Sequence[str], name: str) -> None:
    """A one-line error naming the columns a non-empty table lacks."""
    if len(df) and (missing := [c for c in columns if c not in df.columns]):
        raise ValueError(f"{name} data lacks column(s): {', '.join(missing)}")


def validate_math_table(df: pd.DataFrame) -> pd.DataFrame:
    """Canonical column order and dtypes; a one-line ValueError on a missing column, an empty or
    duplicate prompt_id, an empty problem or reference, or a prior pass rate outside [0, 1]."""
    if missing := [c for c in MATH_COLUMNS if c not in df.columns]:
        raise ValueError(f"invalid math table: missing column(s) {', '.join(missing)}")
    out = df[list(MATH_COLUMNS)].reset_index(drop=True).copy()
    for col in ("prompt_id", "problem", "reference"):
        if not present(out[col]).all():
            raise ValueError(f"invalid math table: empty or non-string {col}")
    if out["prompt_id"].duplicated().any():
        raise ValueError("invalid math table: duplicate prompt_id")
    rate = pd.to_numeric(out["prior_pass_rate"], errors="coerce").to_numpy(float)
    if ((rate < 0) | (rate > 1)).any():
        raise ValueError("invalid math table: prior_pass_rate outside [0, 1]")
    for col in MATH_COLUMNS:
        if col != "prior_pass_rate":
            out[col] = out[col].astype("string")
    out["prior_pass_rate"] = rate
    return out

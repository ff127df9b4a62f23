"""Pass-rate tables: one tidy schema, its validation, parquet round trip.

A pass-rate table has one row per prompt: k of n logged rollouts were correct, p_hat = k/n.

    prompt_id           str    unique; the data/ids.py rule: "<prefix>-" + first 16 hex of
                               sha1(problem text), plus "-<m>" on the m-th repeat of the same text
    source              str    where the prompt comes from (Big-Math's own `source` column, else the
                               data set's name)
    difficulty          str/NA a difficulty label when the data has one ("level 3"), else NA
    n, k                int    rollouts and correct rollouts, 1 <= n, 0 <= k <= n
    p_hat               float  k / n
    mean_len_correct    float  mean length in characters of the correct responses, NaN (NA) if none
    mean_len_incorrect  float  the same for incorrect responses

The loaders of every source are passrates/loaders.py; the synthetic prior passrates/synthetic.py.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

PASSRATE_COLUMNS = tuple(
    "prompt_id source difficulty n k p_hat mean_len_correct mean_len_incorrect".split()
)


# --------------------------------------------------------------------------- schema


def _fail(column: str, row: int | None, what: str) -> None:
    where = f"column {column!r}" + ("" if row is None else f" row {row}")
    raise ValueError(f"invalid pass-rate table: {where}: {what}")


def _numeric(values: pd.Series) -> np.ndarray:
    return pd.to_numeric(values, errors="coerce").to_numpy(dtype=float, na_value=np.nan)


def _first(mask: np.ndarray) -> int | None:
    bad = np.flatnonzero(mask)
    return int(bad[0]) if bad.size else None


def validate_passrates(df: pd.DataFrame) -> pd.DataFrame:
    """Check the schema and return the table with canonical column order and dtypes.

    Columns beyond the schema are kept, after it, unchanged.
    Raises a one-line ValueError naming the first bad column and (positional) row: missing
    column, null id/source/n/k, n < 1, k outside [0, n], p_hat != k/n, negative length,
    duplicate prompt_id.
    """
    if not isinstance(df, pd.DataFrame):
        raise ValueError(f"invalid pass-rate table: expected a DataFrame, got {type(df).__name__}")
    for col in PASSRATE_COLUMNS:
        if col not in df.columns:
            _fail(col, None, f"missing (need {', '.join(PASSRATE_COLUMNS)})")
    df = df.reset_index(drop=True)
    out = pd.DataFrame(index=df.index)
    for col in ("prompt_id", "source", "difficulty"):
        if col != "difficulty" and (row := _first(df[col].isna().to_numpy())) is not None:
            _fail(col, row, "null")
        out[col] = df[col].astype("string")
    num = {c: _numeric(df[c]) for c in PASSRATE_COLUMNS[3:]}  # (N,) each, NaN where missing
    for col in ("n", "k"):
        if (row := _first(~np.isfinite(num[col]) | (num[col] % 1 != 0))) is not None:
            _fail(col, row, f"not an integer: {df[col].iloc[row]!r}")
        out[col] = num[col].astype(np.int64)
    n, k = out["n"].to_numpy(), out["k"].to_numpy()
    if (row := _first(n < 1)) is not None:
        _fail("n", row, f"n = {n[row]} < 1")
    if (row := _first((k < 0) | (k > n))) is not None:
        _fail("k", row, f"k = {k[row]} outside [0, n = {n[row]}]")
    if (row := _first(~(np.abs(num["p_hat"] - k / n) <= 1e-9))) is not None:
        _fail("p_hat", row, f"p_hat = {num['p_hat'][row]} but k/n = {k[row]}/{n[row]}")
    out["p_hat"] = k / n  # the exact quotient, so band edges like 0.4 compare as written
    for col in ("mean_len_correct", "mean_len_incorrect"):
        if (row := _first(num[col] < 0)) is not None:
            _fail(col, row, f"negative length {num[col][row]}")
        out[col] = num[col]
    dup = out["prompt_id"].duplicated().to_numpy()
    if (row := _first(dup)) is not None:
        _fail("prompt_id", row, f"duplicate id {out['prompt_id'].iloc[row]!r}")
    for col in df.columns:  # extra columns (e.g. Wilson intervals) ride along after the schema
        if col not in PASSRATE_COLUMNS:
            out[col] = df[col]
    return out


def write_passrates(df: pd.DataFrame, path: str | Path) -> None:
    """Validate and write a pass-rate table as parquet (parent directories created)."""
    table = validate_passrates(df)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    table.to_parquet(path, index=False)


def read_passrates(path: str | Path) -> pd.DataFrame:
    """Read a parquet pass-rate table written by `write_passrates`, validated."""
    path = Path(path)
    if not path.exists():
        raise ValueError(f"pass-rate table not found: {path}")
    return validate_passrates(pd.read_parquet(path))


# --------------------------------------------------------------------------- building


def passrate_table(ids, source, n, k, difficulty=pd.NA, len_c=np.nan, len_w=np.nan) -> pd.DataFrame:
    """Assemble and validate a pass-rate table from per-row arrays (scalars broadcast)."""
    n, k = np.asarray(n, np.int64), np.asarray(k, np.int64)
    cols = (ids, source, difficulty, n, k, k / np.maximum(n, 1), len_c, len_w)
    return validate_passrates(pd.DataFrame(dict(zip(PASSRATE_COLUMNS, cols, strict=True))))

"""Tidy tables on disk: CSV or parquet chosen by the path's suffix; the one place tables are
read and written.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd


def write_table(df: pd.DataFrame, path: str | Path) -> None:
    """Write a tidy table as CSV or parquet by the path's suffix (directories created)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.suffix == ".parquet":
        df.to_parquet(path, index=False)
    elif path.suffix == ".csv":
        df.to_csv(path, index=False)
    else:
        raise ValueError(
            f"unsupported table suffix {path.suffix!r} for {path}; use .csv or .parquet"
        )


def read_table(path: str | Path) -> pd.DataFrame:
    """Read a table written by `write_table`."""
    path = Path(path)
    if not path.exists():
        raise ValueError(f"table not found: {path}")
    return pd.read_parquet(path) if path.suffix == ".parquet" else pd.read_csv(path)

"""Number formats and markdown tables of the run summary (`analysis.summary.page`).

Every number is printed with enough digits to tell neighbouring arms apart (a final pass rate
with 4 decimals), and a missing value as "n/a", never as 0. A mean over
seeds prints with its t interval from 3 seeds on and as the seeds' values below (`over_seeds`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence

import pandas as pd

from grpo_dial.analysis.seed_stats import MIN_SEEDS

NA = "n/a"


def missing(x) -> bool:
    return x is None or bool(pd.isna(x))


def pct(x, digits: int = 1) -> str:
    """0.2485 -> '24.8%'."""
    return NA if missing(x) else f"{100 * float(x):.{digits}f}%"


def num(x, digits: int = 3) -> str:
    return NA if missing(x) else f"{float(x):.{digits}f}"


def signed(x, digits: int = 1) -> str:
    return NA if missing(x) else f"{float(x):+.{digits}f}"


def sci(x, digits: int = 1) -> str:
    """6.66e-16 -> '6.7e-16'; 0 stays '0'."""
    if missing(x):
        return NA
    return "0" if float(x) == 0 else f"{float(x):.{digits}e}"


def count(x) -> str:
    return NA if missing(x) else f"{int(round(float(x))):,}"


def interval(mean, lo, hi, fmt=num, **kw) -> str:
    """'m [lo, hi]', or 'm' alone when the interval is missing."""
    if missing(mean):
        return NA
    if missing(lo) or missing(hi):
        return fmt(mean, **kw)
    return f"{fmt(mean, **kw)} [{fmt(lo, **kw)}, {fmt(hi, **kw)}]"


NO_INTERVAL = f"(no interval below {MIN_SEEDS} seeds)"


def over_seeds(mean, lo, hi, n, low=None, high=None, fmt=num, **kw) -> str:
    """A mean over n seeds: 'm [lo, hi]' with its t interval (seed_stats.t_interval); below
    MIN_SEEDS, where there is none, the seeds' values and why: '1 seed: v (no interval below 3
    seeds)', '2 seeds: low, high (...)' (low, high: the smallest and largest value). A table
    without the count (n missing) prints as `interval`."""
    if missing(mean):
        return NA
    if missing(n) or int(n) >= MIN_SEEDS:
        return interval(mean, lo, hi, fmt, **kw)
    if int(n) == 1:
        return f"1 seed: {fmt(mean, **kw)} {NO_INTERVAL}"
    values = (
        f"mean {fmt(mean, **kw)}"
        if missing(low) or missing(high)
        else f"{fmt(low, **kw)}, {fmt(high, **kw)}"
    )
    return f"{int(n)} seeds: {values} {NO_INTERVAL}"


def seed_cell(row: Mapping, name: str, fmt=num, mean: str | None = None, **kw) -> str:
    """over_seeds on a table row holding seed_stats.interval_columns(x, name, mean=mean)'s
    columns (name or `mean`, name_lo, name_hi, name_n, name_min, name_max)."""
    get = row.get
    return over_seeds(
        get(name if mean is None else mean), get(f"{name}_lo"), get(f"{name}_hi"),
        get(f"{name}_n"), get(f"{name}_min"), get(f"{name}_max"), fmt, **kw,
    )  # fmt: skip


def arrow(before, after, fmt=num, **kw) -> str:
    return f"{fmt(before, **kw)} -> {fmt(after, **kw)}"


def md_table(header: Sequence[str], rows: Iterable[Sequence[str]]) -> list[str]:
    """A markdown table; '|' inside a cell is escaped so it cannot split the cell."""

    def line(cells):
        return "| " + " | ".join(str(c).replace("|", "\\|") for c in cells) + " |"

    return [line(header), "|" + "---|" * len(header), *(line(r) for r in rows), ""]


def source(*paths: str) -> str:
    """The line under a table naming the files it was read from (paths relative to summary.md)."""
    return "Table: " + ", ".join(f"[`{p}`]({p})" for p in paths) + "."


def pick(tables: Mapping[str, pd.DataFrame], pattern: str) -> list[tuple[str, str, pd.DataFrame]]:
    """(name, path, table) for every non-empty table whose path matches `pattern` in full; name is
    the pattern's `name` group (a pass-rate table, a run) or '' when it has none."""
    found = []
    for path, table in tables.items():
        m = re.fullmatch(pattern, path)
        if m is not None and table is not None and len(table):
            found.append((m.groupdict().get("name", ""), path, table))
    return found


def one(tables: Mapping[str, pd.DataFrame], path: str) -> pd.DataFrame | None:
    """The table at `path` when it is present and not empty."""
    table = tables.get(path)
    return table if table is not None and len(table) else None


__all__ = [
    "NA", "NO_INTERVAL", "arrow", "count", "interval", "md_table", "missing", "num", "one",
    "over_seeds", "pct", "pick", "sci", "seed_cell", "signed", "source",
]  # fmt: skip

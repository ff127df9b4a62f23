"""Pass-rate tables: one tidy schema, loaders for every source, parquet round trip.

A pass-rate table has one row per prompt: k of n logged rollouts were correct, p_hat = k/n.

    prompt_id           str    unique; "<prefix>-" + first 16 hex of sha1(problem text), and a
                               "-<m>" suffix on the m-th repeat of the same text (m >= 1, file order)
    source              str    where the prompt comes from (Big-Math's own `source` column, else the
                               data set's name)
    difficulty          str/NA a difficulty label when the data has one ("level 3"), else NA
    n, k                int    rollouts and correct rollouts, 1 <= n, 0 <= k <= n
    p_hat               float  k / n
    mean_len_correct    float  mean length in characters of the correct responses, NaN (NA) if none
    mean_len_incorrect  float  the same for incorrect responses

Loaders return (table, LoadReport); the report counts rows read, kept and dropped by reason.
Big-Math stores a solve rate, not k: k = round(n * llama8b_solve_rate) with n = 64 rollouts.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

PASSRATE_COLUMNS = (
    "prompt_id",
    "source",
    "difficulty",
    "n",
    "k",
    "p_hat",
    "mean_len_correct",
    "mean_len_incorrect",
)
BIGMATH_HUB_IDS = ("SynthLabsAI/Big-Math-RL-Verified", "open-r1/Big-Math-RL-Verified-Processed")
BIGMATH_COLUMNS = ("problem", "answer", "source", "domain", "llama8b_solve_rate")
GSM8K_MODELS = ("6b_finetuning", "6b_verification", "175b_finetuning", "175b_verification")

# Synthetic Big-Math-like prior: mixture of Beta(a, b) on the latent pass rate. Fitted by least
# squares (Beta-binomial, n = 64) to the Big-Math numbers of DESIGN.md 1.3: it gives 4.0% never
# and 7.2% always solved, extreme mass 13.9% / 24.9% (Dr. GRPO / GRPO), medium 22.7% / 17.5%,
# silent fraction 59/44/32/23/17% at G = 4..64 (expected values; a draw of 20,000 varies by ~0.2%).
SYNTHETIC_MIXTURE = (
    # (weight, a, b)
    (0.617, 4.46, 1.58),  # broad, leaning easy
    (0.149, 1.37, 40.0),  # hard: mass near p = 0.03
    (0.234, 40.0, 1.37),  # easy: mass near p = 0.97
)


@dataclass
class LoadReport:
    """What a loader read, kept and dropped (reason -> row count; 0-count reasons omitted)."""

    name: str
    n_read: int = 0
    n_kept: int = 0
    dropped: dict[str, int] = field(default_factory=dict)

    @property
    def n_dropped(self) -> int:
        return sum(self.dropped.values())

    def drop(self, reason: str, count: int) -> None:
        if count:
            self.dropped[reason] = self.dropped.get(reason, 0) + int(count)

    def __str__(self) -> str:
        why = ", ".join(f"{r}: {c}" for r, c in self.dropped.items()) or "none"
        return f"{self.name}: read {self.n_read}, kept {self.n_kept}, dropped {self.n_dropped} ({why})"


# --------------------------------------------------------------------------- schema


def _fail(column: str, row: int | None, what: str) -> None:
    where = f"column {column!r}" + ("" if row is None else f" row {row}")
    raise ValueError(f"invalid pass-rate table: {where}: {what}")


def _first(mask: np.ndarray) -> int | None:
    bad = np.flatnonzero(mask)
    return int(bad[0]) if bad.size else None


def validate_passrates(df: pd.DataFrame) -> pd.DataFrame:
    """Check the schema and return the table with canonical column order and dtypes.

    Raises a one-line ValueError naming the first bad column and (positional) row: missing
    column, null id/source/n/k, n < 1, k outside [0, n], p_hat != k/n, negative length,
    duplicate prompt_id.
    """
    if not isinstance(df, pd.DataFrame):
        raise ValueError(f"invalid pass-rate table: expected a DataFrame, got {type(df).__name__}")
    for col in PASSRATE_COLUMNS:
        if col not in df.columns:
            _fail(col, None, f"missing (need {', '.join(PASSRATE_COLUMNS)})")
    out = pd.DataFrame(index=pd.RangeIndex(len(df)))
    for col in ("prompt_id", "source", "difficulty"):
        values = df[col].reset_index(drop=True)
        if col != "difficulty" and (row := _first(values.isna().to_numpy())) is not None:
            _fail(col, row, "null")
        out[col] = values.astype("string")
    for col in ("n", "k"):
        values = pd.to_numeric(df[col].reset_index(drop=True), errors="coerce")
        a = values.to_numpy(dtype=float, na_value=np.nan)  # (N,)
        if (row := _first(~np.isfinite(a) | (a != np.round(a)))) is not None:
            _fail(col, row, f"not an integer: {df[col].iloc[row]!r}")
        out[col] = a.astype(np.int64)
    n, k = out["n"].to_numpy(), out["k"].to_numpy()
    if (row := _first(n < 1)) is not None:
        _fail("n", row, f"n = {n[row]} < 1")
    if (row := _first((k < 0) | (k > n))) is not None:
        _fail("k", row, f"k = {k[row]} outside [0, n = {n[row]}]")
    p_hat = pd.to_numeric(df["p_hat"].reset_index(drop=True), errors="coerce").to_numpy(
        dtype=float, na_value=np.nan
    )
    if (row := _first(~(np.abs(p_hat - k / n) <= 1e-9))) is not None:
        _fail("p_hat", row, f"p_hat = {p_hat[row]} but k/n = {k[row]}/{n[row]}")
    out["p_hat"] = k / n  # exact quotient, so band edges like 0.4 compare as written
    for col in ("mean_len_correct", "mean_len_incorrect"):
        values = pd.to_numeric(df[col].reset_index(drop=True), errors="coerce")
        a = values.to_numpy(dtype=float, na_value=np.nan)
        if (row := _first(a < 0)) is not None:
            _fail(col, row, f"negative length {a[row]}")
        out[col] = a
    dup = out["prompt_id"].duplicated().to_numpy()
    if (row := _first(dup)) is not None:
        _fail("prompt_id", row, f"duplicate id {out['prompt_id'].iloc[row]!r}")
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


# --------------------------------------------------------------------------- helpers


def _stable_ids(texts: Iterable[str], prefix: str) -> np.ndarray:
    """prefix-sha1(text)[:16], with "-m" appended to the m-th repeat (file order) so ids are unique."""
    base = pd.Series([hashlib.sha1(t.encode("utf-8")).hexdigest()[:16] for t in texts], dtype=object)
    repeat = base.groupby(base).cumcount().to_numpy()  # (N,) 0 for first occurrence
    ids = (prefix + "-" + base).to_numpy(dtype=object)
    suffix = np.where(repeat > 0, "-" + repeat.astype(str), "")
    return (ids + suffix).astype(object)


def _require_file(path: str | Path) -> Path:
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"file not found: {path}")
    return path


def _read_jsonl(path: Path, report: LoadReport) -> list[dict]:
    """Objects of a JSON-lines file; blank lines skipped, unparsable or non-object lines dropped."""
    rows, bad = [], 0
    with path.open(encoding="utf-8") as fh:
        for line in fh:
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError:
                bad += 1
                continue
            if isinstance(obj, dict):
                rows.append(obj)
            else:
                bad += 1
    report.n_read = len(rows) + bad
    report.drop("invalid_json", bad)
    return rows


def _table(
    ids: np.ndarray,
    source: str | np.ndarray,
    difficulty: object,
    n: np.ndarray,
    k: np.ndarray,
    len_correct: np.ndarray,
    len_incorrect: np.ndarray,
) -> pd.DataFrame:
    n, k = np.asarray(n, np.int64), np.asarray(k, np.int64)
    return validate_passrates(
        pd.DataFrame(
            {
                "prompt_id": ids,
                "source": source,
                "difficulty": difficulty,
                "n": n,
                "k": k,
                "p_hat": k / np.maximum(n, 1),
                "mean_len_correct": len_correct,
                "mean_len_incorrect": len_incorrect,
            }
        )
    )


def _mean_lengths(texts: list[list[str]], correct: list[list[bool]]) -> tuple[np.ndarray, ...]:
    """Mean character length of correct and of incorrect responses per row; NaN where none."""
    sizes = np.array([len(t) for t in texts])  # (N,)
    row = np.repeat(np.arange(len(texts)), sizes)  # (R,) owning row of each response
    length = np.array([len(s) for t in texts for s in t], dtype=float)  # (R,)
    ok = np.array([c for cs in correct for c in cs], dtype=bool)  # (R,)
    out = []
    for mask in (ok, ~ok):
        total = np.bincount(row[mask], weights=length[mask], minlength=len(texts))  # (N,)
        count = np.bincount(row[mask], minlength=len(texts))  # (N,)
        out.append(np.divide(total, count, out=np.full(len(texts), np.nan), where=count > 0))
    return tuple(out)


# --------------------------------------------------------------------------- loaders


def _read_bigmath_frame(source: str | Path, split: str) -> pd.DataFrame:
    path = Path(source)
    if path.is_file():
        return pd.read_parquet(path)
    if path.is_dir():
        files = sorted(path.rglob("*.parquet"))
        if not files:
            raise ValueError(f"no parquet files under directory: {path}")
        return pd.concat([pd.read_parquet(f) for f in files], ignore_index=True)
    if str(source) in BIGMATH_HUB_IDS:
        import datasets  # heavy import, only for the hub path

        return datasets.load_dataset(str(source), split=split).to_pandas()
    raise ValueError(
        f"file not found: {source} (nor a known hub id: {', '.join(BIGMATH_HUB_IDS)})"
    )


def load_bigmath(
    source: str | Path,
    split: str = "train",
    n: int = 64,
    *,
    sources: list[str] | None = None,
    domains: list[str] | None = None,
    solve_rate_band: tuple[float, float] | None = None,
) -> tuple[pd.DataFrame, LoadReport]:
    """Big-Math solve rates as a pass-rate table: k = round(n * llama8b_solve_rate), n = 64.

    `source` is a local parquet file, a directory of parquet files (read recursively, sorted;
    `split` is ignored), or one of BIGMATH_HUB_IDS loaded through `datasets.load_dataset`.
    prompt_id hashes the problem text ("bigmath-..."), computed before any row is dropped so a
    filter never changes an id. Drop reasons, in order: missing_problem, solve_rate_null,
    solve_rate_nan, solve_rate_out_of_range (outside [0, 1]), then the filters: source_filter
    (`source` not in `sources`), domain_filter (no domain entry equal to, or below in the
    "A -> B" hierarchy, one of `domains`), solve_rate_band (solve rate outside [lo, hi]).
    """
    if int(n) < 1:
        raise ValueError(f"n (rollouts behind each solve rate) must be >= 1, got {n}")
    raw = _read_bigmath_frame(source, split)
    missing = [c for c in ("problem", "source", "llama8b_solve_rate") if c not in raw.columns]
    if missing:
        raise ValueError(f"Big-Math data {source} lacks column(s) {', '.join(missing)}")
    report = LoadReport(name=f"bigmath:{source}", n_read=len(raw))
    df = raw.reset_index(drop=True)
    ok_problem = df["problem"].notna().to_numpy()  # (N,)
    report.drop("missing_problem", (~ok_problem).sum())
    df = df[ok_problem].reset_index(drop=True)
    df["prompt_id"] = _stable_ids(df["problem"].astype(str), "bigmath")

    rate = pd.to_numeric(df["llama8b_solve_rate"], errors="coerce")
    is_null = df["llama8b_solve_rate"].isna().to_numpy() & ~rate.isna().to_numpy()
    rate = rate.to_numpy(dtype=float, na_value=np.nan)  # (N,)
    is_null = pd.isna(df["llama8b_solve_rate"]).to_numpy() & ~np.isnan(rate) | is_null
    null = df["llama8b_solve_rate"].map(lambda v: v is None or v is pd.NA).to_numpy(dtype=bool)
    nan = np.isnan(rate) & ~null
    out_of_range = ~np.isnan(rate) & ((rate < 0) | (rate > 1))
    report.drop("solve_rate_null", null.sum())
    report.drop("solve_rate_nan", nan.sum())
    report.drop("solve_rate_out_of_range", out_of_range.sum())
    keep = ~(null | nan | out_of_range)
    df, rate = df[keep].reset_index(drop=True), rate[keep]

    if sources is not None:
        hit = df["source"].isin(list(sources)).to_numpy()
        report.drop("source_filter", (~hit).sum())
        df, rate = df[hit].reset_index(drop=True), rate[hit]
    if domains is not None:
        if "domain" not in df.columns:
            raise ValueError(f"Big-Math data {source} lacks column domain (needed by domains=)")
        flat = df["domain"].explode().dropna().astype(str)  # one row per (prompt, domain entry)
        wanted = tuple(domains)
        match = flat.isin(wanted) | flat.str.startswith(tuple(d + " -> " for d in wanted))
        hit = np.zeros(len(df), bool)
        hit[flat.index[match.to_numpy()].to_numpy()] = True
        report.drop("domain_filter", (~hit).sum())
        df, rate = df[hit].reset_index(drop=True), rate[hit]
    if solve_rate_band is not None:
        lo, hi = (float(x) for x in solve_rate_band)
        if not 0 <= lo <= hi <= 1:
            raise ValueError(f"solve_rate_band must satisfy 0 <= lo <= hi <= 1, got {solve_rate_band}")
        hit = (rate >= lo) & (rate <= hi)
        report.drop("solve_rate_band", (~hit).sum())
        df, rate = df[hit].reset_index(drop=True), rate[hit]

    nn = np.full(len(df), int(n), np.int64)
    k = np.rint(n * rate).astype(np.int64)  # (N,) rate is a fraction of 64 rollouts: exact
    nan_len = np.full(len(df), np.nan)
    table = _table(df["prompt_id"].to_numpy(), df["source"].astype(str).to_numpy(), pd.NA, nn, k,
                   nan_len, nan_len)
    report.n_kept = len(table)
    return table, report

"""Pass-rate tables from each source, built on the data readers, and the spec dispatcher.

    gsm8k_solutions  data/gsm8k.py's logged solutions: n = 4 models, k correct
    math_cot         data/math_cot.py: n = len(score) responses, k = sum(score), "level N"
    bigmath          data/bigmath.py: k = round(n * llama8b_solve_rate), n = 64 rollouts
    synthetic        passrates/synthetic.py's Big-Math-like prior

Each loader returns (table, LoadReport). The logged sources' mean lengths are characters of the
responses the reader kept, the same rows the real-length table (analysis/real_lengths.py) uses.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from pathlib import Path

import numpy as np
import pandas as pd

from grpo_dial.data.bigmath import domain_hit, read_bigmath, solve_rates
from grpo_dial.data.gsm8k import read_gsm8k_solutions
from grpo_dial.data.ids import PREFIX, problem_ids
from grpo_dial.data.math_cot import read_math_cot
from grpo_dial.data.reading import LoadReport
from grpo_dial.data.sources import check_hub_id, local_path
from grpo_dial.passrates.synthetic import synthetic_bigmath_like
from grpo_dial.passrates.tables import passrate_table


def logged_passrates(responses: pd.DataFrame, source: str) -> pd.DataFrame:
    """One pass-rate row per problem of a reading.LOGGED_COLUMNS table (problems in order):
    n responses, k correct, mean character length of the correct and of the incorrect ones."""
    row, ids = pd.factorize(responses["prompt_id"], sort=False)  # (R,) owning problem, (N,)
    n_rows = len(ids)
    first = np.unique(row, return_index=True)[1]  # (N,) first response of each problem
    ok = responses["correct"].to_numpy(dtype=bool)  # (R,)
    length = responses["response"].map(len).to_numpy(dtype=float)  # (R,)
    means = []
    for mask in (ok, ~ok):
        total = np.bincount(row[mask], weights=length[mask], minlength=n_rows)  # (N,)
        count = np.bincount(row[mask], minlength=n_rows)  # (N,)
        means.append(np.divide(total, count, out=np.full(n_rows, np.nan), where=count > 0))
    n = np.bincount(row, minlength=n_rows)
    k = np.bincount(row[ok], minlength=n_rows)
    difficulty = responses["difficulty"].to_numpy(dtype=object)[first]
    ids = ids.to_numpy(dtype=object)
    return passrate_table(ids, source, n, k, difficulty, len_c=means[0], len_w=means[1])


def load_gsm8k_solutions(path: str | Path) -> tuple[pd.DataFrame, LoadReport]:
    """GSM8K example_model_solutions.jsonl: n = 4 logged solutions, k correct, difficulty NA.
    Rows are kept and dropped by data/gsm8k.py (reasons invalid_json, malformed)."""
    responses, report = read_gsm8k_solutions(path)
    return logged_passrates(responses, "gsm8k"), report


def load_math_cot(path: str | Path) -> tuple[pd.DataFrame, LoadReport]:
    """math_cot_100.jsonl: n = len(score) scored responses per MATH problem, k = sum(score),
    difficulty "level N". Rows are kept and dropped by data/math_cot.py."""
    responses, report = read_math_cot(path)
    return logged_passrates(responses, "math"), report


def load_bigmath(
    path: str | Path | None = None,
    split: str = "train",
    n: int = 64,
    *,
    hub: str | None = None,
    sources: list[str] | None = None,
    domains: list[str] | None = None,
    solve_rate_band: tuple[float, float] | list[float] | None = None,
) -> tuple[pd.DataFrame, LoadReport]:
    """Big-Math solve rates as a pass-rate table: k = round(n * llama8b_solve_rate), n = 64.

    Exactly one of `path` (a local parquet file or a directory of them; missing is a one-line
    error, never a download) and `hub` (a hub id such as one of BIGMATH_HUB_IDS, read with
    `datasets.load_dataset(hub, split=split)`).
    prompt_id hashes the problem text ("bigmath-..."), computed before any row is dropped so a
    filter never changes an id. Drop reasons, in order: missing_problem, solve_rate_null,
    solve_rate_nan, solve_rate_out_of_range (outside [0, 1]), then the filters: source_filter
    (`source` not in `sources`), domain_filter (no domain entry equal to, or below in the
    "A -> B" hierarchy, one of `domains`), solve_rate_band (solve rate outside [lo, hi]).
    """
    n = int(n)
    if n < 1:
        raise ValueError(f"n (rollouts behind each solve rate) must be >= 1, got {n}")
    band = None
    if solve_rate_band is not None:
        band = tuple(float(x) for x in solve_rate_band)
        if len(band) != 2 or not 0 <= band[0] <= band[1] <= 1:
            raise ValueError(
                f"solve_rate_band must be (lo, hi), 0 <= lo <= hi <= 1, got {solve_rate_band}"
            )
    source = _bigmath_source(path, hub)
    raw = read_bigmath(source, split)
    needed = ["problem", "source", "llama8b_solve_rate"] + (
        ["domain"] if domains is not None else []
    )
    missing = [c for c in needed if c not in raw.column_names]
    if missing:
        raise ValueError(f"Big-Math data {source} lacks column(s): {', '.join(missing)}")
    report = LoadReport(name=f"bigmath:{source}", n_read=raw.num_rows)

    rate, null = solve_rates(raw)  # (N,) each
    df = raw.select([c for c in needed if c != "llama8b_solve_rate"]).to_pandas()

    ok_problem = df["problem"].notna().to_numpy()
    ids = np.full(len(df), None, dtype=object)
    ids[ok_problem] = problem_ids(df["problem"][ok_problem].astype(str), PREFIX["bigmath"])
    df["prompt_id"] = ids
    steps = [  # (reason, row passes); each dropped row counts under its first failing reason
        ("missing_problem", ok_problem),
        ("solve_rate_null", ~null),
        ("solve_rate_nan", ~(np.isnan(rate) & ~null)),
        ("solve_rate_out_of_range", ~((rate < 0) | (rate > 1))),  # NaN compares False
    ]
    if sources is not None:
        steps.append(("source_filter", df["source"].isin(list(sources)).to_numpy()))
    if domains is not None:
        steps.append(("domain_filter", domain_hit(df["domain"], list(domains))))
    if band is not None:
        steps.append(("solve_rate_band", (rate >= band[0]) & (rate <= band[1])))
    keep = np.ones(len(df), bool)
    for reason, ok in steps:
        report.drop(reason, (keep & ~ok).sum())
        keep &= ok
    df, rate = df[keep], rate[keep]
    k = np.rint(n * rate).astype(np.int64)  # (N,) the rate is a fraction of n rollouts
    source_col = df["source"].fillna("unknown").astype(str).to_numpy()
    table = passrate_table(df["prompt_id"].to_numpy(), source_col, np.full(len(df), n), k)
    report.n_kept = len(table)
    return table, report


def _bigmath_source(path: str | Path | None, hub: str | None) -> str:
    """The local path or the explicit hub id; a missing local path is never tried on the hub."""
    if (path is None) == (hub is None):
        raise ValueError("bigmath table needs exactly one of 'path' (local) and 'hub' (a hub id)")
    if hub is not None:
        return check_hub_id(hub, "bigmath table")
    return str(local_path(path, "bigmath data"))


# --------------------------------------------------------------------------- dispatcher

LOADERS: Mapping[str, Callable[..., tuple[pd.DataFrame, LoadReport]]] = {
    "bigmath": load_bigmath,
    "gsm8k_solutions": load_gsm8k_solutions,
    "math_cot": load_math_cot,
    "synthetic": synthetic_bigmath_like,
}


def load_passrates(spec: Mapping) -> tuple[pd.DataFrame, LoadReport]:
    """Load one pass-rate table from a spec {kind: ..., <that loader's keyword arguments>}.

    `path` is a local file for every file-backed kind; bigmath alone also takes `hub: <id>`
    instead. Unknown kinds, unknown or missing keys and missing files raise a one-line ValueError
    (a missing path shaped like a hub id says to write `hub:`; it is never looked up).
    """
    if not isinstance(spec, Mapping) or "kind" not in spec:
        raise ValueError(
            f"pass-rate spec needs a 'kind' (one of {', '.join(LOADERS)}), got {spec!r}"
        )
    kind = spec["kind"]
    if kind not in LOADERS:
        raise ValueError(f"unknown pass-rate kind {kind!r}; valid: {', '.join(LOADERS)}")
    kwargs = {key: value for key, value in spec.items() if key != "kind"}
    params = inspect.signature(LOADERS[kind]).parameters
    unknown = sorted(set(kwargs) - set(params))
    if unknown:
        hint = " (only bigmath reads the hub)" if "hub" in unknown else ""
        raise ValueError(
            f"unknown key(s) {', '.join(unknown)} for kind {kind!r}; valid: {', '.join(params)}"
            + hint
        )
    needed = [p for p, v in params.items() if v.default is inspect.Parameter.empty]
    if missing := [p for p in needed if p not in kwargs]:
        raise ValueError(f"pass-rate spec of kind {kind!r} needs 'path' (missing {missing[0]!r})")
    return LOADERS[kind](**kwargs)

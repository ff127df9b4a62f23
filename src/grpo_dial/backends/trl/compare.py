"""The own trainer and TRL side by side on one workload (config/trl_compare.yaml).

Pairs: every arm `<name>` with an arm `<name>_trl`, the same dial on the other backend. Per run
(arm, seed), from the run's tables and its length decomposition (decompose/<arm>/seed<s>):

    accuracy        held-out greedy accuracy over all difficulties at the last evaluated step
    d_accuracy      that minus step 0's
    d_length        the decomposition's total: mean response length (characters), last window
                    minus first, and its split mix + within_correct + within_incorrect
    silent          mean over steps of the silent-group fraction
    s_per_step      median wall seconds of a step

Per arm and metric: the mean over seeds and its 90% t interval (analysis.seed_stats, NaN below 3
seeds). Per pair and metric: the two-sided exact Mann-Whitney U test of own against trl seeds
(with n seeds a side the smallest attainable p is 2 / C(2n, n): 0.1 at n = 3).

    python -m grpo_dial.backends.trl.compare <results_dir>   # writes compare/backends.csv
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import stats

from grpo_dial.analysis.seed_stats import t_interval

METRICS = ("accuracy", "d_accuracy", "d_length", "mix", "within_correct", "within_incorrect",
           "silent", "s_per_step")  # fmt: skip
SUFFIX = "_trl"
COLUMNS = ("arm", "metric", "own", "own_lo", "own_hi", "trl", "trl_lo", "trl_hi", "seeds", "p")


def run_metrics(steps: pd.DataFrame, evals: pd.DataFrame, terms: pd.DataFrame) -> dict:
    """METRICS of one run: its steps and evals tables and the decomposition's terms.csv
    (columns quantity, value, ...: analysis.training.decompose.INTERVAL_COLUMNS)."""
    greedy = evals[(evals["mode"] == "greedy") & (evals["difficulty"] == "all")]
    acc = greedy.set_index("step")["accuracy"]
    term = terms.set_index("quantity")["value"]  # one row per quantity
    return {
        "accuracy": float(acc.loc[acc.index.max()]),
        "d_accuracy": float(acc.loc[acc.index.max()] - acc.loc[acc.index.min()]),
        "d_length": float(term["total"]),
        "mix": float(term["mix"]),
        "within_correct": float(term["within_correct"]),
        "within_incorrect": float(term["within_incorrect"]),
        "silent": float(steps["silent_fraction"].mean()),
        "s_per_step": float(steps["wall_seconds"].median()),
    }


def read_runs(results: str | Path) -> pd.DataFrame:
    """One row per run (arm, seed, METRICS) of every arm with tables under `results`."""
    root = Path(results)
    rows = []
    for run in sorted(root.glob("train/*/seed*")):
        arm, seed = run.parent.name, int(run.name.removeprefix("seed"))
        terms = root / "decompose" / arm / run.name / "terms.csv"
        if not (run / "steps.parquet").exists() or not terms.exists():
            continue
        metrics = run_metrics(
            pd.read_parquet(run / "steps.parquet"),
            pd.read_parquet(run / "evals.parquet"),
            pd.read_csv(terms),
        )
        rows.append({"arm": arm, "seed": seed, **metrics})
    return pd.DataFrame(rows, columns=["arm", "seed", *METRICS])


def compare(runs: pd.DataFrame, level: float = 0.9) -> pd.DataFrame:
    """COLUMNS: per pair (arm, arm + SUFFIX) and metric, each backend's mean over seeds with its
    t interval, the seeds a side (the fewer) and the Mann-Whitney p (NaN with fewer than 2)."""
    out = []
    arms = set(runs["arm"])
    for arm in sorted(a for a in arms if f"{a}{SUFFIX}" in arms):
        own = runs[runs["arm"] == arm]
        trl = runs[runs["arm"] == f"{arm}{SUFFIX}"]
        for metric in METRICS:
            a, b = own[metric].dropna().to_numpy(), trl[metric].dropna().to_numpy()
            s, t = t_interval(a, level), t_interval(b, level)
            n = min(len(a), len(b))
            p = float("nan")
            if n >= 2:
                p = float(stats.mannwhitneyu(a, b, alternative="two-sided", method="exact").pvalue)
            out.append((arm, metric, s.mean, s.lo, s.hi, t.mean, t.lo, t.hi, n, p))
    return pd.DataFrame(out, columns=list(COLUMNS))


def markdown(table: pd.DataFrame) -> str:
    """The comparison as a markdown table: mean [lo, hi] per backend, seeds, p."""

    def cell(m: float, lo: float, hi: float) -> str:
        return f"{m:.3g} [{lo:.3g}, {hi:.3g}]" if np.isfinite(lo) else f"{m:.3g}"

    lines = ["| arm | metric | own | trl | seeds | p |", "|---|---|---|---|---|---|"]
    for r in table.itertuples():
        lines.append(
            f"| {r.arm} | {r.metric} | {cell(r.own, r.own_lo, r.own_hi)} | "
            f"{cell(r.trl, r.trl_lo, r.trl_hi)} | {r.seeds} | {r.p:.2g} |"
        )
    return "\n".join(lines)


def main(results: str) -> None:
    table = compare(read_runs(results))
    if table.empty:
        raise SystemExit(f"no pair of <arm> and <arm>{SUFFIX} runs with tables under {results}")
    out = Path(results) / "compare" / "backends.csv"
    out.parent.mkdir(parents=True, exist_ok=True)
    table.to_csv(out, index=False)
    print(markdown(table))


if __name__ == "__main__":
    main(sys.argv[1])

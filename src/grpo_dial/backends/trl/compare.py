"""The own trainer and TRL side by side on one workload (config/trl_compare.yaml).

Pairs: every arm `<name>` with an arm `<name>_trl`, the same dial on the other backend. Per run
(arm, seed), from the run's tables and its length decomposition (decompose/<arm>/seed<s>):

    accuracy        held-out greedy accuracy over all difficulties at the last evaluated step
    d_accuracy      that minus step 0's
    sampled         held-out sampled accuracy (train.eval_samples per prompt, the training
                    temperature) at the last evaluated step; NaN without sampled evaluations
    d_sampled       that minus step 0's: what says whether a run learns
    d_train         the training batches' accuracy, mean over the last WINDOW of the steps minus
                    the first (at least one step each): the same learning on the prompts trained
    d_length        the decomposition's total: mean response length (characters), last window
                    minus first, and its split mix + within_correct + within_incorrect
    silent          mean over steps of the silent-group fraction
    s_per_step      median wall seconds of a step

Per arm and metric: the mean over seeds and its 90% t interval (analysis.seed_stats, NaN below 3
seeds). Per pair and metric:

    p           two-sided exact Mann-Whitney U test of own against trl seeds (with n seeds a side
                the smallest attainable p is 2 / C(2n, n): 0.1 at n = 3, 0.029 at 4)
    diff        mean(trl) - mean(own) with Welch's 90% t interval
    detectable  the smallest |diff| Welch's two-sided t test at 5% detects with 80% power, given
                the two sides' seed spreads (analysis.seed_stats.detectable_shift)
    agree       p >= ALPHA: the backends agree within seed noise; None below MIN_TESTABLE seeds
                a side, where p cannot reach ALPHA and the rule cannot fail

A pair's agreement says something only where both of its runs learn: `not_learning` names every
arm whose d_sampled (d_accuracy without sampled evaluations) interval does not lie above 0.

    python -m grpo_dial.backends.trl.compare <results_dir>   # writes compare/backends.csv
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import stats

from grpo_dial.analysis.seed_stats import (
    detectable_shift,
    difference_interval,
    t_interval,
    welch_se,
)

METRICS = ("accuracy", "d_accuracy", "sampled", "d_sampled", "d_length", "mix", "within_correct",
           "within_incorrect", "silent", "s_per_step", "d_train")  # fmt: skip
WINDOW = 1 / 8  # share of the steps in d_train's first and last windows
SUFFIX = "_trl"
COLUMNS = ("arm", "metric", "own", "own_lo", "own_hi", "trl", "trl_lo", "trl_hi", "seeds", "p",
           "diff", "diff_lo", "diff_hi", "detectable", "agree")  # fmt: skip
ALPHA = 0.05  # the rank test's level for the agreement rule
MIN_TESTABLE = 4  # fewest seeds a side at which the exact rank test can reach ALPHA


def run_metrics(steps: pd.DataFrame, evals: pd.DataFrame, terms: pd.DataFrame) -> dict:
    """METRICS of one run: its steps and evals tables and the decomposition's terms.csv
    (columns quantity, value, ...: analysis.training.decompose.INTERVAL_COLUMNS)."""
    final, change = _last_and_change(evals, "greedy")
    sampled, d_sampled = _last_and_change(evals, "sampled")
    term = terms.set_index("quantity")["value"]  # one row per quantity
    return {
        "accuracy": final,
        "d_accuracy": change,
        "sampled": sampled,
        "d_sampled": d_sampled,
        "d_length": float(term["total"]),
        "mix": float(term["mix"]),
        "within_correct": float(term["within_correct"]),
        "within_incorrect": float(term["within_incorrect"]),
        "silent": float(steps["silent_fraction"].mean()),
        "s_per_step": float(steps["wall_seconds"].median()),
        "d_train": _window_change(steps.sort_values("step")["accuracy"].to_numpy(dtype=float)),
    }


def _window_change(x: np.ndarray) -> float:
    """mean of x's last ceil(WINDOW n) values minus its first's (n = len(x)); NaN when empty."""
    if not len(x):
        return float("nan")
    w = max(1, int(np.ceil(WINDOW * len(x))))
    return float(x[-w:].mean() - x[:w].mean())


def _last_and_change(evals: pd.DataFrame, mode: str) -> tuple[float, float]:
    """Held-out accuracy over all difficulties in `mode` at the last evaluated step, and that
    minus the first step's; NaN, NaN when the run has no such evaluation."""
    rows = evals[(evals["mode"] == mode) & (evals["difficulty"] == "all")]
    if rows.empty:
        return float("nan"), float("nan")
    acc = rows.set_index("step")["accuracy"]
    last = float(acc.loc[acc.index.max()])
    return last, last - float(acc.loc[acc.index.min()])


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
    t interval, the seeds a side (the fewer), the Mann-Whitney p (NaN with fewer than 2), trl
    minus own with Welch's interval, the detectable difference and the agreement (module
    docstring)."""
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
            diff = difference_interval(b, a, level)
            detectable = detectable_shift(*welch_se(a, b), level=1 - ALPHA)
            agree = bool(p >= ALPHA) if n >= MIN_TESTABLE else None
            out.append((arm, metric, s.mean, s.lo, s.hi, t.mean, t.lo, t.hi, n, p, *diff,
                        detectable, agree))  # fmt: skip
    return pd.DataFrame(out, columns=list(COLUMNS))


def not_learning(runs: pd.DataFrame, level: float = 0.9) -> list[str]:
    """Every arm whose held-out change (d_sampled, or d_accuracy where no run has sampled
    evaluations) has a t interval over seeds that does not lie above 0, as one line each."""
    lines = []
    for arm, rows in runs.groupby("arm"):
        metric = "d_sampled" if rows["d_sampled"].notna().any() else "d_accuracy"
        ci = t_interval(rows[metric].to_numpy(dtype=float), level)
        if not ci.lo > 0:
            lines.append(f"{arm} does not learn: {metric} {ci.mean:.3g} [{ci.lo:.3g}, {ci.hi:.3g}]"
                         " over seeds; its pair's agreement says nothing")  # fmt: skip
    return lines


def markdown(table: pd.DataFrame) -> str:
    """The comparison as a markdown table: mean [lo, hi] per backend, seeds, p."""

    def cell(m: float, lo: float, hi: float) -> str:
        return f"{m:.3g} [{lo:.3g}, {hi:.3g}]" if np.isfinite(lo) else f"{m:.3g}"

    def verdict(agree: object) -> str:
        return "-" if agree is None or pd.isna(agree) else ("yes" if agree else "**no**")

    lines = ["| arm | metric | own | trl | trl - own | detectable | p | agree |",
             "|---|---|---|---|---|---|---|---|"]  # fmt: skip
    for r in table.itertuples():
        lines.append(
            f"| {r.arm} | {r.metric} | {cell(r.own, r.own_lo, r.own_hi)} | "
            f"{cell(r.trl, r.trl_lo, r.trl_hi)} | {cell(r.diff, r.diff_lo, r.diff_hi)} | "
            f"{r.detectable:.2g} | {r.p:.2g} | {verdict(r.agree)} |"
        )
    return "\n".join(lines)


def main(results: str) -> None:
    runs = read_runs(results)
    table = compare(runs)
    if table.empty:
        raise SystemExit(f"no pair of <arm> and <arm>{SUFFIX} runs with tables under {results}")
    out = Path(results) / "compare" / "backends.csv"
    out.parent.mkdir(parents=True, exist_ok=True)
    table.to_csv(out, index=False)
    print(markdown(table))
    for line in not_learning(runs):
        print(line)


if __name__ == "__main__":
    main(sys.argv[1])

"""Adaptive against uniform group sizes at equal sample budget: accuracy against samples spent,
samples to reach a target accuracy, silent fraction, and where the samples went. Pure, tidy.

Inputs are the gathered run tables (a `dial` and a `seed` column in front): steps, evals and
allocation (grpo_dial.train.records). `pairs` maps each adaptive arm to its uniform twin.
Intervals over seeds are Student-t 95% intervals of the mean, mean +- t_{n-1} sd / sqrt(n)
(analysis.seed_stats: NaN below 3 seeds, where each value also carries its count, smallest and
largest seed value); differences are paired by seed.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd

from grpo_dial.analysis.seed_stats import interval_columns, t_interval
from grpo_dial.core.bands import band_order

CURVE_COLUMNS = ("dial", "seed", "step", "samples", "mode", "accuracy")
LEVEL = 0.95  # of every interval over seeds here
COMPARISON_COLUMNS = (
    "adaptive uniform metric n_seeds adaptive_mean adaptive_lo adaptive_hi uniform_mean "
    "uniform_lo uniform_hi diff_mean diff_lo diff_hi target reached_adaptive reached_uniform "
    "adaptive_n adaptive_min adaptive_max uniform_n uniform_min uniform_max diff_n diff_min "
    "diff_max"
).split()
BAND_COLUMNS = "dial seed band draws mean_G samples samples_share unsampled_share".split()
INTERVAL_COLUMNS = "dial mode step n_seeds samples accuracy_mean accuracy_lo accuracy_hi".split()


def accuracy_curves(steps: pd.DataFrame, evals: pd.DataFrame) -> pd.DataFrame:
    """Held-out accuracy (difficulty 'all') of each run at each evaluation against the samples
    the run had spent by then: cumulative `samples` of its steps (0 at step 0)."""
    spent = steps.sort_values(["dial", "seed", "step"]).assign(
        samples=lambda d: d.groupby(["dial", "seed"])["samples"].cumsum()
    )[["dial", "seed", "step", "samples"]]
    evals = evals[evals["difficulty"] == "all"]
    out = evals.merge(spent, on=["dial", "seed", "step"], how="left")
    out["samples"] = out["samples"].where(out["step"] > 0, 0).astype(float)
    return out[list(CURVE_COLUMNS)].sort_values(["dial", "seed", "mode", "step"], ignore_index=True)


def curve_intervals(curves: pd.DataFrame) -> pd.DataFrame:
    """Per (dial, mode, step) of the accuracy curves: seeds, mean samples spent, and the mean
    accuracy over seeds with its 95% t interval (seed_stats.t_interval; NaN below 3 seeds)."""
    rows = [
        (dial, mode, step, len(part), float(part["samples"].mean()),
         *t_interval(part["accuracy"].to_numpy(), LEVEL)[:3])
        for (dial, mode, step), part in curves.groupby(["dial", "mode", "step"], sort=True)
    ]  # fmt: skip
    return pd.DataFrame(rows, columns=INTERVAL_COLUMNS)


def samples_to_reach(curve: pd.DataFrame, target: float) -> float:
    """Samples at which one run's accuracy curve first reaches `target`, linearly interpolated
    between evaluations; NaN when it never does."""
    s, a = curve["samples"].to_numpy(float), curve["accuracy"].to_numpy(float)
    hit = np.flatnonzero(a >= target)
    if hit.size == 0:
        return np.nan
    i = int(hit[0])
    if i == 0:
        return float(s[0])
    frac = (target - a[i - 1]) / (a[i] - a[i - 1])
    return float(s[i - 1] + frac * (s[i] - s[i - 1]))


def _final(curves: pd.DataFrame, mode: str) -> pd.Series:
    last = curves[curves["mode"] == mode].sort_values("step").groupby(["dial", "seed"]).tail(1)
    return last.set_index(["dial", "seed"])["accuracy"]


def silent_sample_share(responses: pd.DataFrame) -> pd.Series:
    """Per run (dial, seed): the share of its responses spent in silent groups (k = 0 or k = G),
    i.e. samples that carried no learning signal."""
    silent = (responses["k"] == 0) | (responses["k"] == responses["G"])
    return silent.groupby([responses["dial"], responses["seed"]]).mean()


def compare_arms(
    curves: pd.DataFrame,
    steps: pd.DataFrame,
    pairs: Mapping[str, str],
    mode: str = "sampled",
    target: float | None = None,
    responses: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """One row per (pair, metric): final accuracy, samples to reach `target` (default: the
    uniform arm's mean final accuracy), mean silent-group fraction, samples per step and, given
    the responses, the share of samples in silent groups; each per arm and as the seed-paired
    difference adaptive - uniform, with t intervals over seeds."""
    final = _final(curves, mode)
    silent = steps.groupby(["dial", "seed"])["silent_fraction"].mean()
    wasted = None if responses is None else silent_sample_share(responses)
    samples = steps.groupby(["dial", "seed"])["samples"].mean()
    runs = dict(tuple(curves[curves["mode"] == mode].groupby(["dial", "seed"])))
    evaluated = final.groupby(level="dial").groups  # dial -> its (dial, seed) index entries
    rows = []
    for adaptive, uniform in pairs.items():
        arms = (adaptive, uniform)
        seeds = sorted(set.intersection(*({s for _, s in evaluated.get(arm, [])} for arm in arms)))
        if not seeds:
            raise ValueError(f"no seed has both arms {adaptive!r} and {uniform!r} evaluated")

        def per_seed(table: pd.Series, arms=arms, seeds=seeds) -> dict[str, np.ndarray]:
            return {arm: table.loc[arm].loc[seeds].to_numpy() for arm in arms}

        goal = float(final.loc[uniform].loc[seeds].mean()) if target is None else float(target)
        reach = {
            arm: np.array([samples_to_reach(runs[(arm, seed)], goal) for seed in seeds])
            for arm in arms
        }
        metrics = {
            f"final_{mode}_accuracy": per_seed(final),
            "samples_to_target": reach,
            "silent_fraction": per_seed(silent),
            "samples_per_step": per_seed(samples),
        }
        if wasted is not None:
            metrics["silent_sample_share"] = per_seed(wasted)
        for metric, values in metrics.items():
            a, u = values[adaptive], values[uniform]
            row = {"adaptive": adaptive, "uniform": uniform, "metric": metric,
                   "n_seeds": len(seeds), "target": goal,
                   "reached_adaptive": int(np.isfinite(reach[adaptive]).sum()),
                   "reached_uniform": int(np.isfinite(reach[uniform]).sum())}  # fmt: skip
            for side, x in (("adaptive", a), ("uniform", u), ("diff", a - u)):
                row |= interval_columns(x, side, LEVEL, mean=f"{side}_mean")
            rows.append(row)
    return pd.DataFrame(rows, columns=COMPARISON_COLUMNS)


def samples_by_band(allocation: pd.DataFrame) -> pd.DataFrame:
    """Where each run's samples went, by the prompt's base pass-rate band: prompt draws, mean G
    per draw, samples, share of the run's samples, and the share of draws left unsampled."""
    grouped = allocation.groupby(["dial", "seed", "band"], observed=True)["G"]
    out = grouped.agg(draws="size", mean_G="mean", samples="sum").reset_index()
    out["unsampled_share"] = grouped.apply(lambda g: float((g == 0).mean())).to_numpy()
    total = out.groupby(["dial", "seed"])["samples"].transform("sum")
    out["samples_share"] = out["samples"] / total
    return out[list(BAND_COLUMNS)]


def ordered_bands(by_band: pd.DataFrame) -> pd.DataFrame:
    """`by_band` with `band` an ordered categorical: the pass-rate bands from low p to high p
    (grpo_dial.core.bands), then any other label sorted (difficulty labels, 'unrated')."""
    order = band_order(by_band["band"].astype(str))
    return by_band.assign(band=pd.Categorical(by_band["band"], categories=order, ordered=True))

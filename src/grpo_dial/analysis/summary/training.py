"""Sections of the run summary about the trained policy: the RL runs' accuracy and length by
correctness, the identity on the model, length pressure, adaptive groups and the estimators'
state. These numbers depend on the machine's float rounding, which RL amplifies (docs/results.md,
"Across machines"). Each takes the tables keyed by their path under the results directory.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd

from grpo_dial.analysis.markdown import (
    arrow,
    interval,
    md_table,
    missing,
    num,
    one,
    pct,
    sci,
    seed_cell,
    signed,
    source,
)
from grpo_dial.analysis.training.windows import excludes_zero
from grpo_dial.core.arm_names import arm_name

Tables = Mapping[str, pd.DataFrame]
RUNS = "decompose/summary.csv"
STEPS = "decompose/all_steps.parquet"
WINDOWS = "decompose/windows.csv"
MACHINE = "Trained policy: these numbers depend on the machine's float rounding."


def samples_per_step(steps: pd.DataFrame | None) -> pd.Series | None:
    """Mean responses sampled per step, per (dial, seed): every sampling round counted (DAPO's
    refills included), so a count, never negative."""
    if steps is None or "samples" not in steps:
        return None
    return steps.groupby(["dial", "seed"], sort=False)["samples"].mean()


def _per_step(samples: pd.Series | None, dial: str, seed=None) -> str:
    if samples is None or dial not in samples.index.get_level_values(0):
        return "n/a"
    value = samples.loc[dial].mean() if seed is None else samples.loc[(dial, seed)]
    ref = samples.loc["grpo"].mean() if "grpo" in samples.index.get_level_values(0) else None
    return f"{value:.1f}" + ("" if ref is None else f" ({value / ref:.2f}x)")


def base_policy(tables: Tables) -> list[str]:
    """The warm-started policy's pass rates over its training pool: the mean, and the mean by
    difficulty level (lowest first)."""
    path = "passrates/base_policy.parquet"
    t = one(tables, path)
    if t is None:
        return []
    levels = t.groupby("difficulty")["p_hat"].agg(["size", "mean"]).sort_values("mean")
    rows = [[str(level), str(int(v["size"])), num(v["mean"])] for level, v in levels.iterrows()]
    return [
        "## The base policy", "", MACHINE, "",
        f"Mean pass rate {num(t['p_hat'].mean())} over {len(t)} prompts "
        f"({int(t['n'].iloc[0])} samples each); by level:", "",
        *md_table(["level", "prompts", "mean pass rate"], rows), source(path), "",
    ]  # fmt: skip


def rl_runs(tables: Tables) -> list[str]:
    """Per dial (mean over seeds) and per run: accuracy before -> after, the length change and its
    split by correctness in characters (the share within incorrect only where the run's total
    excludes 0), the headline in those terms, samples per step; then the split across windows."""
    t = one(tables, RUNS)
    if t is None:
        return []
    samples = samples_per_step(one(tables, STEPS))
    cols = [
        "accuracy_before",
        "accuracy_after",
        "heldout_sampled_before",
        "heldout_sampled_after",
        "heldout_greedy_before",
        "heldout_greedy_after",
        "total",
        "within_incorrect",
        "within_incorrect_work",
        "within_incorrect_redundant",
        "mix",
        "within_correct",
    ]
    mean = t.groupby("dial", sort=False)[cols].mean()
    n_seeds = t.groupby("dial", sort=False)["seed"].nunique()
    rows = [[
        arm_name(d), str(n_seeds[d]), arrow(r["accuracy_before"], r["accuracy_after"]),
        arrow(r["heldout_sampled_before"], r["heldout_sampled_after"]),
        arrow(r["heldout_greedy_before"], r["heldout_greedy_after"]), signed(r["total"]),
        signed(r["within_incorrect"]),
        f"{signed(r['within_incorrect_work'])} / {signed(r['within_incorrect_redundant'])}",
        signed(r["mix"]), signed(r["within_correct"]), _per_step(samples, d),
    ] for d, r in mean.iterrows()]  # fmt: skip
    gain = 100 * (mean["heldout_sampled_after"] - mean["heldout_sampled_before"])
    lines = [
        "## RL runs: accuracy and length by correctness", "", MACHINE, "",
        *md_table(["arm", "seeds", "training accuracy", "held-out, sampled", "held-out, greedy",
                   "length change (chars)", "within incorrect (chars)", "of which work / padding",
                   "mix", "within correct (chars)", "samples per step (x GRPO)"], rows),
        headline(t), "",
    ]  # fmt: skip
    if gain.notna().any():
        lines += [
            f"Held-out sampled accuracy gain, mean over seeds: {signed(gain.min())} "
            f"({arm_name(gain.idxmin())}) to {signed(gain.max())} ({arm_name(gain.idxmax())}) "
            "points.", "",
        ]  # fmt: skip
    runs = [[
        arm_name(r["dial"]), str(r["seed"]),
        interval(r["total"], r["total_lo"], r["total_hi"], signed, digits=1),
        interval(r["within_incorrect"], r["within_incorrect_lo"], r["within_incorrect_hi"],
                 signed, digits=1),
        interval(r["within_correct"], r["within_correct_lo"], r["within_correct_hi"], signed,
                 digits=1),
        _share(r), pct(r["final_silent_fraction"], 0), pct(r["extreme_mass_share"], 0),
        _per_step(samples, r["dial"], r["seed"]),
    ] for _, r in t.iterrows()]  # fmt: skip
    return [
        *lines, "Per run (90% prompt-bootstrap intervals; the share within incorrect responses "
        "only where the total change's interval excludes 0):", "",
        *md_table(["arm", "seed", "length change (chars)", "within incorrect (chars)",
                   "within correct (chars)", "share within incorrect", "silent groups, last 10%",
                   "extreme-prompt mass", "samples per step"], runs),
        source(RUNS, *([STEPS] if samples is not None else [])), "", *windows_section(tables),
    ]  # fmt: skip


def _share(r: pd.Series) -> str:
    """The run's share within incorrect with its interval, or why it has none."""
    if not excludes_zero(r["total_lo"], r["total_hi"]):
        return "n/a (total holds 0)"
    return interval(r["incorrect_share"], r["incorrect_share_lo"], r["incorrect_share_hi"], pct,
                    digits=0)  # fmt: skip


def headline(runs: pd.DataFrame) -> str:
    """The decomposition's answer in its stable terms: the absolute within-incorrect and
    within-correct changes (range of the arms' means over seeds, and how many runs' 90%
    intervals lie above 0), then the share only over the runs whose total excludes 0."""
    mean = runs.groupby("dial", sort=False)[["within_incorrect", "within_correct"]].mean()
    up_w = int((runs["within_incorrect_lo"] > 0).sum())
    up_c = int((runs["within_correct_lo"] > 0).sum())
    shared = runs[[excludes_zero(lo, hi) for lo, hi in zip(runs["total_lo"], runs["total_hi"],
                                                             strict=True)]]  # fmt: skip
    text = (
        f"Incorrect responses changed in mean length by {signed(mean['within_incorrect'].min())} "
        f"to {signed(mean['within_incorrect'].max())} characters across arms (mean over seeds; "
        f"{up_w} of {len(runs)} runs' 90% intervals above 0), correct ones by "
        f"{signed(mean['within_correct'].min())} to {signed(mean['within_correct'].max())} "
        f"({up_c} of {len(runs)} above 0)."
    )
    if len(shared):
        text += (
            f" The share of the change within incorrect responses, over the {len(shared)} runs "
            f"whose total change excludes 0: {pct(shared['incorrect_share'].min(), 0)} to "
            f"{pct(shared['incorrect_share'].max(), 0)}."
        )
    return text


def windows_section(tables: Tables) -> list[str]:
    """The split at each window fraction (decompose/windows.csv): per arm and fraction the mean
    over seeds of the within-incorrect and within-correct changes, and the runs whose share is
    reported (total's interval excludes 0)."""
    w = one(tables, WINDOWS)
    if w is None:
        return []
    fractions = sorted(w["window_fraction"].unique())
    rows = []
    for dial, f in w.groupby("dial", sort=False):
        cells = []
        for frac in fractions:
            g = f[f["window_fraction"] == frac]
            cells.append(f"{signed(g['within_incorrect'].mean())} / "
                         f"{signed(g['within_correct'].mean())} "
                         f"({int(g['share_reported'].sum())}/{len(g)})")  # fmt: skip
        rows.append([arm_name(dial), *cells])
    return [
        "Across windows (the first and last fraction of steps): within incorrect / within "
        "correct, characters, mean over seeds (runs whose share is reported):", "",
        *md_table(["arm", *(f"{frac:g}" for frac in fractions)], rows), source(WINDOWS), "",
    ]  # fmt: skip


def identity_model(tables: Tables) -> list[str]:
    """The identity on the trained model: sequence-level residual, and how far the token-level
    aggregation turns the update (angle = arccos of the smallest cosine)."""
    path = "decompose/all_identity.parquet"
    t = one(tables, path)
    if t is None:
        return []
    rows = []
    for dial, f in t.groupby("dial", sort=False):
        cos = float(f["token_cosine"].min())
        angle = np.degrees(np.arccos(np.clip(cos, -1.0, 1.0))) if not missing(cos) else np.nan
        rows.append([arm_name(dial), str(f["length_norm"].iloc[0]), str(len(f)),
                     sci(f["seq_relative_residual"].max()), num(cos), num(angle, 0)])  # fmt: skip
    return [
        "## Identity on the trained model", "", MACHINE, "",
        "Largest relative residual of the identity at sequence level: "
        f"{sci(t['seq_relative_residual'].max(), 0)}.", "",
        *md_table(["arm", "normalizer", "probed groups", "largest relative residual",
                   "smallest token-level cosine", "largest turn (degrees)"], rows),
        source(path), "",
    ]  # fmt: skip


def length_pressure(tables: Tables) -> list[str]:
    """The normalizer's push on wrong-answer length in the own runs, and whether it predicts the
    inflation."""
    path, pred_path = "length_pressure/summary.csv", "length_pressure/prediction.csv"
    t = one(tables, path)
    if t is None:
        return []
    inflation = "within_incorrect" if "within_incorrect" in t else "wrong_length_change"
    rows = [[
        arm_name(r["dial"]), r["normalizer"], str(r["n_seeds"]),
        seed_cell(r, "pressure_wrong", num, digits=2), seed_cell(r, "pressure_net", num, digits=2),
        seed_cell(r, inflation, signed, digits=1),
    ] for _, r in t.iterrows()]  # fmt: skip
    lines = ["## Length pressure in the RL runs", "", MACHINE, "",
             *md_table(["arm", "normalizer", "seeds", "pressure on wrong answers",
                        "net pressure", "wrong-answer inflation (chars)"], rows)]  # fmt: skip
    pred = one(tables, pred_path)
    if pred is not None:
        p = pred.iloc[0]
        lines += [
            f"Across {int(p['n_runs'])} runs the Spearman correlation between pressure and "
            f"inflation is {num(p['spearman_rho'], 2)}; runs with pressure inflate by "
            f"{signed(p['inflation_gap'], 2)} characters more than those without.",
            "",
        ]
    return [*lines, source(path, *([pred_path] if pred is not None else [])), ""]


def _verdict(r: pd.Series) -> str:
    """'no detectable difference' unless the paired interval excludes 0; none without an
    interval (fewer than 3 seeds, seed_stats.MIN_SEEDS)."""
    if missing(r["diff_lo"]) or missing(r["diff_hi"]):
        return "no verdict without an interval"
    if r["diff_lo"] > 0:
        return "adaptive higher"
    return "adaptive lower" if r["diff_hi"] < 0 else "no detectable difference"


ALLOCATION_METRICS = {
    "final_sampled_accuracy": ("final held-out sampled accuracy", 3),
    "final_greedy_accuracy": ("final held-out greedy accuracy", 3),
    "samples_to_target": ("samples to reach the target accuracy", 0),
    "silent_fraction": ("silent groups", 2),
    "samples_per_step": ("samples per step", 1),
    "silent_sample_share": ("samples in silent groups", 2),
}


def allocation(tables: Tables) -> list[str]:
    """Adaptive against uniform group sizes at equal samples per step, paired over seeds."""
    path, band_path = "allocation/comparison.csv", "allocation/by_band.csv"
    t = one(tables, path)
    if t is None:
        return []
    rows = []
    for _, r in t.iterrows():
        label, digits = ALLOCATION_METRICS.get(r["metric"], (r["metric"], 3))
        fmt = {"fmt": num, "digits": digits}
        reached = ""
        if r["metric"] == "samples_to_target" and not missing(r.get("target")):
            label = f"samples to reach accuracy {r['target']:.3f}"
            reached = (f" ({int(r['reached_adaptive'])} / {int(r['reached_uniform'])} of "
                       f"{int(r['n_seeds'])} seeds got there)")  # fmt: skip
        rows.append([
            f"{arm_name(r['adaptive'])} vs {arm_name(r['uniform'])}", label, str(r["n_seeds"]),
            seed_cell(r, "adaptive", mean="adaptive_mean", **fmt),
            seed_cell(r, "uniform", mean="uniform_mean", **fmt),
            seed_cell(r, "diff", signed, mean="diff_mean", digits=digits) + reached,
            _verdict(r),
        ])  # fmt: skip
    lines = ["## Adaptive against uniform group sizes (equal samples per step)", "", MACHINE, "",
             *md_table(["pair", "metric", "seeds", "adaptive", "uniform", "difference",
                        "verdict"], rows)]  # fmt: skip
    bands = one(tables, band_path)
    if bands is not None:
        share = bands.groupby(["dial", "band"], sort=False)[["samples_share", "mean_G"]].mean()
        lines += ["Samples by base pass-rate band (mean over seeds):", "",
                  *md_table(["arm", "band", "share of samples", "mean G"],
                            [[arm_name(d), b, pct(v["samples_share"], 0), num(v["mean_G"], 1)]
                             for (d, b), v in share.iterrows()])]  # fmt: skip
    return [*lines, source(path, *([band_path] if bands is not None else [])), ""]


def estimator_state(tables: Tables) -> list[str]:
    """Each registered estimator's logged columns over training (first -> last step, mean over
    seeds), for the arms that log one; the quantity is named `<estimator label>: <column>`."""
    from grpo_dial.core.estimators import column_labels

    steps = one(tables, STEPS)
    if steps is None:
        return []
    rows = []
    quantities = {c: f"{est}: {c.replace('_', ' ')}" for c, est in column_labels().items()}
    for column, label in quantities.items():
        if column not in steps:
            continue
        logged = steps.dropna(subset=[column])
        for dial, f in logged.groupby("dial", sort=False):
            ends = f.sort_values("step").groupby("seed")[column].agg(["first", "last"]).mean()
            rows.append([arm_name(dial), label, arrow(ends["first"], ends["last"])])
    if not rows:
        return []
    return [MACHINE, "", *md_table(["arm", "quantity", "first -> last step"], rows),
            source(STEPS), ""]  # fmt: skip


__all__ = [
    "allocation", "base_policy", "estimator_state", "identity_model", "length_pressure", "rl_runs",
    "samples_per_step",
]  # fmt: skip

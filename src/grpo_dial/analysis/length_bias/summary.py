"""Summaries of the length-bias simulation (analysis.length_bias.tail): drift per arm and awareness
with 90 % t intervals over seeds (analysis.seed_stats: none below 3 seeds, where the columns
<q>_n, <q>_min and <q>_max give the seeds' count and values), ratios to GRPO, and the fit of the
closed form (R^2, seed_stats.r_squared).

Ratios are taken per seed before the interval: every arm sees the same prompts and random
streams (common random numbers), so most of the noise cancels in the ratio.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from grpo_dial.analysis.seed_stats import interval_columns, r_squared


def summarize(steps_df: pd.DataFrame) -> pd.DataFrame:
    """One row per (arm, awareness): for the wrong and the correct path, the measured per-step
    drift (mean over steps, then over seeds, with the 90 % t interval over seeds), the closed
    form's, their ratio to GRPO's at the same awareness, and the typical tail at the first and
    last step (mean over seeds)."""
    per_seed = (
        steps_df.groupby(["arm", "awareness", "seed"], sort=False)
        .agg(
            mw=("measured_drift_wrong", "mean"),
            pw=("predicted_drift_wrong", "mean"),
            mc=("measured_drift_correct", "mean"),
            pc=("predicted_drift_correct", "mean"),
        )
        .reset_index()
    )
    first = steps_df[steps_df["step"] == steps_df["step"].min()]
    last = steps_df[steps_df["step"] == steps_df["step"].max()]
    rows = []
    for (arm, aw), f in per_seed.groupby(["arm", "awareness"], sort=False):
        row = {"arm": arm, "awareness": aw, "n_seeds": len(f)}
        for path, m, pr in (("wrong", "mw", "pw"), ("correct", "mc", "pc")):
            row |= interval_columns(f[m].to_numpy(), f"measured_drift_{path}")
            row[f"predicted_drift_{path}"] = f[pr].mean()
        sel = (first["arm"] == arm) & (first["awareness"] == aw)
        sel_last = (last["arm"] == arm) & (last["awareness"] == aw)
        for path in ("wrong", "correct"):
            row[f"tail_{path}_start"] = first.loc[sel, f"tail_{path}"].mean()
            row[f"tail_{path}_end"] = last.loc[sel_last, f"tail_{path}"].mean()
        rows.append(row)
    out = pd.DataFrame(rows)
    # ratio of each arm's wrong-path drift to GRPO's, per seed (CRN: same prompts and streams)
    ref = per_seed[per_seed["arm"] == "grpo"].set_index(["awareness", "seed"])
    key = pd.MultiIndex.from_frame(per_seed[["awareness", "seed"]])
    for kind, col in (("measured", "mw"), ("predicted", "pw")):
        base = ref[col].reindex(key).to_numpy() if len(ref) else np.full(len(per_seed), np.nan)
        good = np.abs(ref["pw"].reindex(key).to_numpy()) > 0 if len(ref) else base > 0
        per_seed[kind] = np.where(good, per_seed[col].to_numpy() / np.where(good, base, 1), np.nan)
    for i, (_, f) in enumerate(per_seed.groupby(["arm", "awareness"], sort=False)):
        cols = interval_columns(f["measured"].to_numpy(), "measured_ratio_to_grpo")
        out.loc[i, list(cols)] = list(cols.values())
        out.loc[i, "predicted_ratio_to_grpo"] = f["predicted"].mean()
    return out


def fit(steps_df: pd.DataFrame) -> pd.DataFrame:
    """R^2 of the measured per-step drift (mean over prompts and seeds) against the closed form
    over every (arm, awareness, step) that has one (lambda-GRPO's predictions are NaN), per
    path, like the silent-fraction check; and the largest |z| of a blind (awareness 0) arm's
    drift from 0 (z = mean / SE over steps x seeds), every arm."""
    by_step = steps_df.groupby(["arm", "awareness", "step"]).mean(numeric_only=True)
    rows = []
    for path in ("wrong", "correct"):
        m = by_step[f"measured_drift_{path}"].to_numpy()
        p = by_step[f"predicted_drift_{path}"].to_numpy()
        m, p = m[np.isfinite(p)], p[np.isfinite(p)]
        blind = steps_df[steps_df["awareness"] == 0]
        z = blind.groupby("arm")[f"measured_drift_{path}"].agg(
            lambda x: abs(x.mean()) / (x.std(ddof=1) / np.sqrt(len(x))) if len(x) > 1 else np.nan
        )
        rows.append(
            {
                "path": path,
                "r2": r_squared(m, p),
                "n_points": len(m),
                "blind_max_abs_z": float(z.max()) if len(z) else np.nan,
            }
        )
    return pd.DataFrame(rows)

"""Summary of the controlled Bernoulli-logit run (analysis.simulate.controlled): one row per arm.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from grpo_dial.analysis.seed_stats import r_squared

TARGET_MEAN_P = 0.9  # threshold behind summarize's steps_to_mean_p_0_9


def summarize(steps_df: pd.DataFrame, prompts_df: pd.DataFrame) -> pd.DataFrame:
    """One row per arm: arm, lr, silent_r2, initial_extreme_mass (first step's share of |update|
    on extreme prompts, the paper's measure), realized_extreme_mass (whole run),
    hardest_quartile_final_p, final_mean_p, mean_silent_fraction (the first round's silent
    fraction, mean over steps), samples_total, oversampling_factor = samples / (J G steps),
    steps_to_mean_p_0_9 (updates applied until mean p >= 0.9; NA if never).

    realized_extreme_mass = sum_t share_t * mean|u|_t / sum_t mean|u|_t, i.e. the whole run's
    sum of |update| from extreme prompts over the sum of all |update| (J cancels).
    """
    rows = []
    for arm, s in steps_df.groupby("arm", sort=False):
        s = s.sort_values("step")
        pr = prompts_df[prompts_df["arm"] == arm]
        n_prompts, g, n_steps = len(pr), int(s["group_size"].iloc[0]), len(s)
        mass = s["mean_abs_update"].to_numpy()  # (T,)
        share = np.nan_to_num(s["extreme_mass_share"].to_numpy())  # (T,); NaN only where mass 0
        mean_p = np.append(s["mean_p"].to_numpy(), pr["final_p"].mean())  # (T+1,) after t updates
        reached = np.flatnonzero(mean_p >= TARGET_MEAN_P)
        samples = int(s["samples"].sum())
        rows.append(
            {
                "arm": arm,
                "lr": float(s["lr"].iloc[0]),
                "silent_r2": r_squared(
                    s["silent_fraction"].to_numpy(), s["expected_silent_fraction"].to_numpy()
                ),
                "initial_extreme_mass": float(share[0]),
                "realized_extreme_mass": float((share * mass).sum() / mass.sum())
                if mass.sum() > 0
                else np.nan,
                "hardest_quartile_final_p": float(
                    pr.loc[pr["initial_quartile"] == 1, "final_p"].mean()
                ),
                "final_mean_p": float(pr["final_p"].mean()),
                "mean_silent_fraction": float(s["silent_fraction"].mean()),
                "samples_total": samples,
                "oversampling_factor": samples / (n_prompts * g * n_steps),
                "steps_to_mean_p_0_9": int(reached[0]) if reached.size else pd.NA,
            }
        )
    out = pd.DataFrame(rows)
    out["steps_to_mean_p_0_9"] = out["steps_to_mean_p_0_9"].astype("Int64")
    return out

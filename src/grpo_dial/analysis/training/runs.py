"""The RL runs' summary table (decompose/summary.csv): one row per dial and seed, from the
gathered per-run tables; and the closed-form silent rate each step's prompts had at the base
policy's pass rates. Pure pandas, no I/O.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from grpo_dial.core.theory import silent_rate


def expected_silent_base(responses: pd.DataFrame, table: pd.DataFrame) -> pd.Series:
    """Per step: mean over its first-round groups of p^G + (1-p)^G at the base pass rate p."""
    first = responses[responses["resample_round"] == 0]
    groups = first.drop_duplicates(["step", "group"])[["step", "prompt_id", "G"]]
    p = groups["prompt_id"].map(dict(zip(table["prompt_id"], table["p_hat"], strict=True)))
    groups = groups.assign(expected=silent_rate(p.to_numpy(dtype=float), groups["G"].to_numpy()))
    return groups.groupby("step")["expected"].mean()


def summarize_runs(
    steps: pd.DataFrame,
    terms: pd.DataFrame,
    mass: pd.DataFrame,
    evals: pd.DataFrame,
    prompts_per_step: int,
    group_size: int,
) -> pd.DataFrame:
    """One row per run: accuracy and length before/after, the three terms with intervals, the
    share of growth from incorrect responses, silent fraction, extreme-prompt mass, extra samples,
    held-out sampled accuracy at the start and the end, and the answer checker's timeouts,
    errors, crashes and bad references over the run (checker_* of the steps table)."""
    rows = []
    for (dial, seed), run_steps in steps.groupby(["dial", "seed"], sort=True):
        t = terms[(terms["dial"] == dial) & (terms["seed"] == seed)].set_index("quantity")
        m = mass[(mass["dial"] == dial) & (mass["seed"] == seed)]
        e = evals[(evals["dial"] == dial) & (evals["seed"] == seed)]
        e = e[e["difficulty"] == "all"]
        sampled = e[e["mode"] == "sampled"].sort_values("step")["accuracy"]
        greedy = e[e["mode"] == "greedy"].sort_values("step")["accuracy"]
        tail = run_steps[run_steps["step"] > run_steps["step"].max() * 0.9]
        extreme = m[m["band"] == "extreme"]
        row = {
            "dial": dial, "seed": int(seed),
            "accuracy_before": t.loc["a0", "value"], "accuracy_after": t.loc["a1", "value"],
            "length_before": t.loc["L0", "value"], "length_after": t.loc["L1", "value"],
        }  # fmt: skip
        for term in ("total", "mix", "within_correct", "within_incorrect",
                     "within_incorrect_work", "within_incorrect_redundant"):  # fmt: skip
            row[term] = t.loc[term, "value"]
            row[f"{term}_lo"] = t.loc[term, "lo"]
            row[f"{term}_hi"] = t.loc[term, "hi"]
        row["incorrect_share"] = t.loc["within_incorrect", "share"]
        row["incorrect_share_lo"] = t.loc["within_incorrect", "share_lo"]
        row["incorrect_share_hi"] = t.loc["within_incorrect", "share_hi"]
        row["final_silent_fraction"] = float(tail["silent_fraction"].mean())
        row["extreme_mass_share"] = (
            float(extreme["mass"].sum() / m["mass"].sum()) if m["mass"].sum() > 0 else np.nan
        )
        row["extra_samples"] = int(
            run_steps["samples"].sum() - len(run_steps) * prompts_per_step * group_size
        )
        row["heldout_sampled_before"] = float(sampled.iloc[0]) if len(sampled) else np.nan
        row["heldout_sampled_after"] = float(sampled.iloc[-1]) if len(sampled) else np.nan
        row["heldout_greedy_before"] = float(greedy.iloc[0]) if len(greedy) else np.nan
        row["heldout_greedy_after"] = float(greedy.iloc[-1]) if len(greedy) else np.nan
        for col in (c for c in run_steps.columns if c.startswith("checker_")):  # train.guard
            row[col] = int(run_steps[col].sum())  # the answer checker's failures over the run
        rows.append(row)
    return pd.DataFrame(rows)

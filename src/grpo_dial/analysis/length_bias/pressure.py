"""Length pressure of a logged run: how much more its normalizer pushes long wrong answers than a
length-neutral normalizer would, per step, from per-response advantages, lengths and correctness.

For the B responses that entered step t's loss (column `trained` when logged, else all), with
advantage A_i, length L_i (tokens when logged, else `length`), group g(i), the normalizer's
weight per token w_i (core.advantage's reductions)

    sequence  w_i = 1 / (B L_i)      token  w_i = 1 / sum_j L_j      constant  w_i = 1 / (B L_max)
    lambda    w_i = f_i / sum_j L_j, f_i lambda-GRPO's factor (core.token_weights.lambda_factors)
              at the step's lambda
    sequence_sum  w_i = 1 / B (LUSPO)     sum  w_i = 1 (verl token-sum)
    bnpo      w_i = 1 / (C sum_{j in c(i)} L_j), c(i) response i's micro-batch of `rows`
              consecutive loss rows, C of them (TRL's bnpo, core.token_weights.bnpo_weights)

and w_bar = mean_i w_i (the constant normalizer with the same mean weight: length-neutral), the
pressure on a path (wrong: A_i < 0; correct: A_i > 0) is

    P_path = sum_{i in path} A_i (w_i / w_bar - 1) (L_i - Lbar_g(i)) / sum_i |A_i|     (tokens)

Why: a length parameter whose score is proportional to L - E[L] (a geometric tail's is
(1 - q)(T - E[T]), core.length_drift) is moved by sum_i A_i w_i s_i; the part a constant weight
would give is sum_i A_i w_bar s_i, so P is the normalizer's own contribution, with the group's
mean length standing in for E[L]. Under 1/|o| a long wrong answer (A < 0, w < w_bar) gets
P_wrong > 0 (pushed longer) and a long correct one P_correct < 0. P is 0 exactly under the
constant normalizer, sequence_sum and sum, and under a batch token mean too (every weight in a
step is equal; its small drift in the closed form comes from step-to-step changes of the total,
which a per-step lens cannot see). P_net = P_wrong + P_correct is what a length policy blind to
correctness feels: 0 in expectation, since the advantages are then independent of the lengths.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from grpo_dial.analysis.seed_stats import interval_columns

NORMALIZERS = ("sequence", "token", "constant", "lambda", "sequence_sum", "sum", "bnpo")
IMPORTED = ("sequence", "token", "constant", "lambda")  # the lens an imported run is read under
NEEDED = ("step", "group", "advantage", "reward")


def _lengths(df: pd.DataFrame) -> pd.Series:
    if "tokens" in df.columns:
        return df["tokens"].astype(float)
    if "length" in df.columns:
        return df["length"].astype(float)
    raise ValueError("responses need a 'tokens' or 'length' column")


def _lambda_factors(loss: pd.DataFrame, lam: float | pd.Series, r: float) -> np.ndarray:
    import torch

    from grpo_dial.core.token_weights import lambda_factors

    cells = loss.groupby(["step", "group"], sort=False).ngroup().to_numpy()  # one group per step
    per_row = loss["step"].map(lam) if isinstance(lam, pd.Series) else pd.Series(lam, loss.index)
    if per_row.isna().any():
        raise ValueError("lambda is missing for some steps of a lambda-GRPO run")
    f = lambda_factors(
        torch.from_numpy(loss["L"].to_numpy(float)),
        torch.from_numpy(cells),
        torch.from_numpy(per_row.to_numpy(float)),
        r,
    )
    return f.numpy()


def step_pressure(
    responses: pd.DataFrame,
    normalizer: str,
    max_length: float | None = None,
    lam: float | pd.Series = 0.0,
    r: float = 0.25,
    rows: int | None = None,
) -> pd.DataFrame:
    """One row per step: step, normalizer, n (responses in the loss), pressure_wrong,
    pressure_correct, pressure_net (module docstring), wrong_length and correct_length (mean L of
    r = 0 and r = 1 responses in the step, all logged rows). Raises if a needed column is absent;
    a step whose advantages are all 0 gets pressure 0. lam, r: lambda-GRPO's (a Series: lambda
    per step, a learnable lambda's logged values); rows: bnpo's micro-batch (loss rows, in the
    table's order within a step)."""
    if normalizer not in NORMALIZERS:
        raise ValueError(f"unknown normalizer {normalizer!r}; valid: {', '.join(NORMALIZERS)}")
    if normalizer == "bnpo" and (isinstance(rows, bool) or not isinstance(rows, int) or rows < 1):
        raise ValueError(f"normalizer 'bnpo' needs micro-batch rows (integer >= 1), got {rows!r}")
    missing = [c for c in NEEDED if c not in responses.columns]
    if missing:
        raise ValueError(f"responses lack column(s) {missing}; need {list(NEEDED)}")
    df = responses.assign(L=_lengths(responses))
    if df["advantage"].isna().any():
        raise ValueError("advantage has missing values (not logged); use with_advantages first")
    trained = df["trained"].astype(bool) if "trained" in df.columns else pd.Series(True, df.index)
    loss = df[trained.to_numpy()].copy()
    b = loss.groupby("step")["L"].transform("size")
    if normalizer == "sequence":
        w = 1.0 / (b * loss["L"].clip(lower=1))
    elif normalizer in ("token", "lambda"):
        w = 1.0 / loss.groupby("step")["L"].transform("sum").clip(lower=1)
        if normalizer == "lambda":
            w = w * _lambda_factors(loss, lam, r)
    elif normalizer == "bnpo":
        chunk = loss.groupby("step").cumcount() // rows  # micro-batch of each loss row
        tokens = loss.groupby(["step", chunk])["L"].transform("sum").clip(lower=1)
        count = loss.groupby("step")["L"].transform("size").floordiv(-rows).mul(-1)  # C
        w = 1.0 / (count * tokens)
    elif normalizer in ("sequence_sum", "sum"):
        w = pd.Series(1.0 / b if normalizer == "sequence_sum" else 1.0, index=loss.index)
    else:
        w = pd.Series(1.0 / (b * (max_length or 1.0)), index=loss.index)
    by_step = w.groupby(loss["step"])
    rel = w / by_step.transform("mean") - 1.0  # w_i / w_bar - 1
    # equal weights in a step (constant, batch token mean): exactly 0, not a rounding residue
    rel = rel.where(by_step.transform("max") > by_step.transform("min"), 0.0)
    centered = loss["L"] - loss.groupby(["step", "group"])["L"].transform("mean")
    push = loss["advantage"] * rel * centered
    scale = loss["advantage"].abs().groupby(loss["step"]).sum()
    wrong = push.where(loss["advantage"] < 0, 0.0).groupby(loss["step"]).sum()
    correct = push.where(loss["advantage"] > 0, 0.0).groupby(loss["step"]).sum()
    safe = scale.where(scale > 0, 1.0)
    out = pd.DataFrame(
        {
            "step": scale.index,
            "normalizer": normalizer,
            "n": loss.groupby("step").size().to_numpy(),
            "pressure_wrong": (wrong / safe).to_numpy(),
            "pressure_correct": (correct / safe).to_numpy(),
        }
    )
    out["pressure_net"] = out["pressure_wrong"] + out["pressure_correct"]
    by_r = df.groupby(["step", df["reward"] > 0])["L"].mean().unstack()
    out["wrong_length"] = out["step"].map(by_r.get(False, pd.Series(dtype=float)))
    out["correct_length"] = out["step"].map(by_r.get(True, pd.Series(dtype=float)))
    return out


def with_advantages(responses: pd.DataFrame) -> tuple[pd.DataFrame, str]:
    """(responses, source): logged advantages when every row has one ('logged'); otherwise GRPO's
    (r - mean_g) / std_g recomputed from the rewards by core.advantage with TRL's sample std
    ('recomputed: ...'), so the lens still runs, labelled as an assumption."""
    if "advantage" in responses.columns and responses["advantage"].notna().all():
        return responses, "logged"
    import torch

    from grpo_dial.core.advantage import advantages
    from grpo_dial.core.dial import Dial

    keys = responses[["step", "group"]].astype(np.int64).to_numpy()
    _, ids = np.unique(keys, axis=0, return_inverse=True)
    rewards = torch.tensor(responses["reward"].to_numpy(dtype=float))
    dial = Dial(std_ddof=1, eps=1e-4)  # TRL's default scale_rewards="group"
    adv = advantages(rewards, torch.from_numpy(ids.reshape(-1)), dial).numpy()
    note = "recomputed: advantages not logged, GRPO's group std (ddof 1, eps 1e-4) assumed"
    return responses.assign(advantage=adv), note


def run_summary(steps: pd.DataFrame, window_fraction: float = 0.1) -> dict:
    """Mean pressure over steps and the change of mean wrong / correct length between the first
    and the last window_fraction of steps (the inflation the pressure should predict)."""
    s = steps.sort_values("step")
    n = max(1, int(round(window_fraction * len(s))))
    first, last = s.head(n), s.tail(n)
    return {
        "pressure_wrong": s["pressure_wrong"].mean(),
        "pressure_correct": s["pressure_correct"].mean(),
        "pressure_net": s["pressure_net"].mean(),
        "wrong_length_change": last["wrong_length"].mean() - first["wrong_length"].mean(),
        "correct_length_change": last["correct_length"].mean() - first["correct_length"].mean(),
    }


def dial_summary(per_run: pd.DataFrame) -> pd.DataFrame:
    """One row per dial from per-run rows (dial, seed, normalizer, run_summary's keys): means and
    90 % t intervals over seeds of pressure_wrong, pressure_net, the two length changes and the
    decomposition's within_incorrect term when given, each with its seeds' count, smallest and
    largest value (seed_stats.interval_columns: no interval below 3 seeds)."""
    rows = []
    for dial, f in per_run.groupby("dial", sort=False):
        row = {"dial": dial, "normalizer": f["normalizer"].iloc[0], "n_seeds": len(f)}
        cols = ["pressure_wrong", "pressure_net", "wrong_length_change", "correct_length_change"]
        for col in cols + [c for c in ("within_incorrect",) if c in f.columns]:
            row |= interval_columns(f[col].to_numpy(dtype=float), col)
        rows.append(row)
    return pd.DataFrame(rows)


def predicts_inflation(per_run: pd.DataFrame, inflation: str = "wrong_length_change") -> dict:
    """Does pressure predict inflation across runs? Spearman rho between a run's mean
    pressure_wrong and its inflation column (e.g. the decomposition's within_incorrect term), and
    the difference in mean inflation between runs with pressure (> 0) and without (== 0)."""
    from scipy.stats import spearmanr

    x, y = per_run["pressure_wrong"].to_numpy(float), per_run[inflation].to_numpy(float)
    rho = float(spearmanr(x, y).statistic) if len(x) > 2 and np.ptp(x) > 0 else np.nan
    with_p, without = y[x > 1e-12], y[np.abs(x) <= 1e-12]
    gap = with_p.mean() - without.mean() if with_p.size and without.size else np.nan
    return {
        "inflation": inflation,
        "spearman_rho": rho,
        "inflation_gap": float(gap),
        "n_runs": len(x),
    }

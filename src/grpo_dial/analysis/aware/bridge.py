"""The bridge to real models: how hard GRPO's 1/|o| would push a real model's lengths.

Input: several scored samples of one model per prompt (math_cot_100: 8 Qwen2.5-Math responses per
MATH problem; any responses table with problem_id, correct and a length). Per problem (a group of
G responses, k correct, p = k/G):

  auc        within-group AUC of length for being wrong (analysis/channel.within_group_auc):
             0.5 = length says nothing about correctness inside a group (a blind length policy,
             which the 1/|o| normalizer cannot move); awareness a = 2 auc - 1.
  pressure   the normalizer's own push (analysis/length_bias/pressure.step_pressure, one step,
             GRPO's advantages (r - mean) / std recomputed, sample std as TRL): P_wrong,
             P_correct and P_net in length units per unit of |advantage|, what 1/|o| adds
             beyond a length-neutral weight of the same mean.
  u_wrong, u_correct
             the closed form (core/length_drift.tail_drift, per-sequence mean, alpha 1) per group
             and unit learning rate, at the problems' pass rates, awareness a and a geometric
             length with the responses' mean (the whole response treated as free tail, c = 1):
             the per-step drift of log E[L] of wrong- and correct-path lengths it predicts.

Intervals: percentile bootstrap over problems (n_boot resamples, level 0.9). Only problems with
both right and wrong answers ("informative": 0 < k < G) carry the AUC and the push; a unanimous
problem's advantages are all 0. `n_informative` and `n_pairs` (wrong-right pairs inside a
problem) say how many stand behind the interval: resampling 100 problems of which 10 are
informative resamples those 10.

Sources (`bridge_sources`): math_cot_100, 8 samples of one model (Qwen2.5-Math) per MATH problem,
is the real analogue of a GRPO group. GSM8K's example_model_solutions has 4 solutions per problem
from four different GPT-3 models (6B and 175B, finetuned and verifier-selected): many more
informative problems, but its within-group length differences mix the models' styles with any
length choice of one policy, so it bounds the association from another side rather than
replicating it.

What this predicts: the direction and the size relative to other normalizers of the artifact's
push on this model's length policy, IF the policy's length choice carried the association the
samples show. What it does not: the association is between outcome and length in the samples,
not a proven choice the policy could make knowing it is wrong (long wrong answers may be long
because of what made them wrong); the realized change under Adam, clipping and KL (the aware-tail
runs measure that on a small policy); and anything about lengths in absolute tokens per step,
which scale with the learning rate.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from grpo_dial.analysis.channel import within_group_auc
from grpo_dial.analysis.length_bias.pressure import step_pressure
from grpo_dial.analysis.training.decompose import percentile_interval
from grpo_dial.core.length_drift import tail_drift

BRIDGE_COLUMNS = (
    "quantity", "value", "lo", "hi", "n_problems", "n_informative", "n_pairs", "unit",
)  # fmt: skip
_UNITS = {
    "auc": "AUC", "awareness": "2 AUC - 1", "mean_length": "chars",
    "pressure_wrong": "chars per |A|", "pressure_correct": "chars per |A|",
    "pressure_net": "chars per |A|", "u_wrong": "dlog E[L] per group per unit lr",
    "u_correct": "dlog E[L] per group per unit lr",
}  # fmt: skip


def _grpo_advantages(df: pd.DataFrame) -> np.ndarray:
    """(r - mean_g) / std_g with the sample std (TRL); 0 in a unanimous group."""
    g = df.groupby("group")["reward"]
    sd = g.transform("std").fillna(0.0)
    a = (df["reward"] - g.transform("mean")) / sd.where(sd > 0, 1.0)
    return a.where(sd > 0, 0.0).to_numpy()


def _stats(df: pd.DataFrame, length: str) -> dict[str, float]:
    wrong = ~df["correct"].to_numpy(dtype=bool)
    L = df[length].to_numpy(dtype=float)
    auc = within_group_auc(df["group"].to_numpy(), wrong, L)
    frame = pd.DataFrame(
        {"step": 0, "group": df["group"].to_numpy(), "reward": (~wrong).astype(float),
         "tokens": L, "advantage": _grpo_advantages(df.assign(reward=(~wrong).astype(float)))}
    )  # fmt: skip
    p = step_pressure(frame, "sequence").iloc[0]
    k = df.groupby("group")["correct"].agg(["sum", "size"])
    G = int(k["size"].max())
    pj = (k["sum"] / k["size"]).to_numpy(dtype=float)
    mean_len = float(L.mean())
    q = mean_len / (1 + mean_len)
    a = float(np.clip(2 * auc - 1, 0.0, 1.0)) if np.isfinite(auc) else 0.0
    u = tail_drift(pj, q, q, 1.0, G, 1.0, "sequence", a, ddof=1)
    return {
        "auc": auc,
        "awareness": 2 * auc - 1,
        "mean_length": mean_len,
        "pressure_wrong": float(p["pressure_wrong"]),
        "pressure_correct": float(p["pressure_correct"]),
        "pressure_net": float(p["pressure_net"]),
        "u_wrong": float(np.mean(u.wrong)),
        "u_correct": float(np.mean(u.correct)),
    }


def length_bridge(
    responses: pd.DataFrame,
    length: str = "length_chars",
    n_boot: int = 1000,
    seed: int = 0,
    level: float = 0.9,
) -> pd.DataFrame:
    """BRIDGE_COLUMNS, one row per quantity (module docstring); groups = problem_id."""
    missing = [c for c in ("problem_id", "correct", length) if c not in responses.columns]
    if missing:
        raise ValueError(f"responses table lacks column(s) {missing}")
    if n_boot < 1 or not 0 < level < 1:
        raise ValueError(f"need n_boot >= 1 and 0 < level < 1, got {n_boot}, {level}")
    df = responses.reset_index(drop=True)
    df = df.assign(group=pd.factorize(df["problem_id"])[0])
    point = _stats(df, length)
    members = df.groupby("group").indices  # problem -> row indices
    keys = np.array(sorted(members))
    rng = np.random.default_rng(seed)
    reps = []
    for _ in range(n_boot):
        pick = rng.choice(keys, size=len(keys), replace=True)
        rows = np.concatenate([members[k] for k in pick])
        new_group = np.repeat(np.arange(len(pick)), [len(members[k]) for k in pick])
        reps.append(_stats(df.iloc[rows].assign(group=new_group), length))
    boot = pd.DataFrame(reps)
    k = df.groupby("group")["correct"].agg(["sum", "size"])
    informative = (k["sum"] > 0) & (k["sum"] < k["size"])
    pairs = int((k["sum"] * (k["size"] - k["sum"])).sum())
    out = []
    for q, v in point.items():
        lo, hi = percentile_interval(boot[q].to_numpy(dtype=float)[:, None], level)
        out.append(
            (q, v, float(lo[0]), float(hi[0]), len(keys), int(informative.sum()), pairs, _UNITS[q])
        )
    return pd.DataFrame(out, columns=list(BRIDGE_COLUMNS))


def bridge_sources(
    responses: pd.DataFrame, n_boot: int = 1000, seed: int = 0, level: float = 0.9
) -> pd.DataFrame:
    """length_bridge per source present in a real_lengths responses table (math_cot_100 first,
    then GSM8K), with a `source` column; ValueError when neither is there."""
    from grpo_dial.analysis.real_lengths import GSM8K, MATH_COT

    parts = [
        length_bridge(
            responses[responses["source"] == name], n_boot=n_boot, seed=seed, level=level
        ).assign(source=name)  # fmt: skip
        for name in (MATH_COT, GSM8K)
        if (responses["source"] == name).any()
    ]
    if not parts:
        raise ValueError(
            f"no {MATH_COT} or {GSM8K} responses (sources: {sorted(set(responses['source']))})"
        )
    return pd.concat(parts, ignore_index=True)

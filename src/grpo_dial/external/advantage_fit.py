"""The estimator read from the numbers: a log's advantages fitted by every dial setting.

Where a run logs each response's advantage (TRL's `advantage` column, a verl dump's key, any
column the user maps to `advantage`), every candidate (`candidates`: each preset, with the
engines' std (ddof 0 or 1) and eps (TRL 1e-4, verl 1e-6, OpenRLHF 1e-9) and verl's
lone-response rule; in float64, the nearest few in float32 as well, the engines' dtype)
computes the advantages of the run's own groups from their logged rewards (a step is the batch
of the batch-level estimators); its residual is the largest |A_logged - A_dial| over the
responses (leaving out silent groups whose reward binary cannot hold: see float32). The best
candidate is the one with the smallest residual (ties: the earlier one).
Only the advantage is read: the loss fields (length_norm, ratio_level, silent) leave no trace
in it, so GRPO, DAPO and GSPO fit alike. `disagreement` compares the config's dial
(run_estimator) with the fit.

float32 (verl computes the group mean and std in float32). A group whose rewards are all equal
has sigma 0 and every advantage 0 in exact arithmetic; in float32 a reward that binary cannot
hold (0.1, 0.3, 0.95) leaves mean - r of a few ulps and a std of the same size, so (r - mean) /
(std + eps) is far from 0: up to 0.056 at G 8-16 under verl's eps 1e-6, 6e-4 under TRL's 1e-4.
The float32 candidates reproduce it (the dial computes in the rewards' dtype);
`float32_silent_groups` finds it in a log.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np
import pandas as pd

FIT_COLUMNS = ("candidate", "dial", "dtype", "max_residual", "responses")
ENGINE_STD = {"paper": {"std_ddof": 0}, "TRL": {"std_ddof": 1, "eps": 1e-4},
              "verl": {"std_ddof": 1, "eps": 1e-6, "singleton": "reward"},
              "OpenRLHF": {"std_ddof": 1, "eps": 1e-9}}  # fmt: skip
MAX_STEPS = 100  # steps fitted (the first ones that log advantages): bounds the cost
FLOAT32_TRIED = 6  # candidates also computed in float32: the nearest in float64
NEEDS_MORE = ("lambda_grpo", "stratified_grpo", "hadw_grpo", "hadw_released")  # other inputs


def candidates() -> list[tuple[str, dict]]:
    """(label, dial entry) of every preset in each engine's std form, advantage fields unique;
    presets that need inputs a log does not hold (NEEDS_MORE) are left out."""
    from grpo_dial.core.dial import PRESETS, dial_from_config

    out, seen = [], set()
    for name in PRESETS:
        if name in NEEDS_MORE:
            continue
        for engine, std in ENGINE_STD.items():
            entry = {"preset": name, **std}
            try:
                dial = dial_from_config(entry)
            except ValueError:
                continue
            key = _advantage_signature(dial)
            if key not in seen:
                seen.add(key)
                out.append((f"{name} ({engine} std)", entry))
    return out


def _advantage_signature(dial) -> tuple:
    from grpo_dial.core.dial import dial_settings

    loss = {"length_norm", "ratio_level", "silent", "max_resample_rounds", "max_length",
            "clip_low", "clip_high", "bnpo_rows", "empty_rows"}  # fmt: skip
    return tuple((k, getattr(dial, k)) for k in dial_settings() if k not in loss)


BATCH_LEVEL = ("batch_std", "gpg", "reinforce_pp", "reinforce_pp_baseline", "gdpo")


def _dyadic(reward: pd.Series) -> pd.Series:
    """Rewards float32 holds exactly and averages without rounding: r * 256 an integer."""
    return reward.map(lambda r: math.isfinite(r) and float(r * 256).is_integer())


def _rounding_only(rows: pd.DataFrame) -> np.ndarray:
    """(N,) bool: responses of a silent group (all rewards equal, two or more) whose reward is
    not _dyadic: their logged advantage is 0 or float32 rounding, whichever the engine did."""
    reward = rows["raw_reward"] if "raw_reward" in rows else rows["reward"]
    g = reward.groupby([rows["step"], rows["group"]])
    silent = (g.transform("max") == g.transform("min")) & (g.transform("size") >= 2)
    return (silent & ~_dyadic(reward)).to_numpy()


def _logged(responses: pd.DataFrame, column: str) -> pd.DataFrame:
    """The rows with a finite logged advantage, of the first MAX_STEPS steps that have one."""
    if column not in responses.columns:
        raise ValueError(f"the run's responses have no {column!r} column to fit")
    rows = responses[np.isfinite(pd.to_numeric(responses[column], errors="coerce"))]
    steps = sorted(rows["step"].unique())[:MAX_STEPS]
    return rows[rows["step"].isin(steps)].sort_values(["step", "group"], kind="stable")


def _inputs(rows: pd.DataFrame) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(reward, step, group id, length), each (N,): the logged reward (`raw_reward`, the
    engine's, else `reward`) and one id per (step, group)."""
    reward = rows["raw_reward"] if "raw_reward" in rows else rows["reward"]
    cell = rows.groupby(["step", "group"], sort=False).ngroup().to_numpy(np.int64)
    return (reward.to_numpy(float), rows["step"].to_numpy(np.int64), cell,
            rows["length"].to_numpy(float))  # fmt: skip


def dial_advantages(rows: pd.DataFrame | tuple, entry: Mapping, dtype: str = "float64"
                    ) -> np.ndarray:  # fmt: skip
    """(N,) the dial's advantages of `rows` (as _logged orders them, or their _inputs) from
    their logged rewards: one call per step for the batch-level presets, one call over all
    steps' groups for the others (their advantage is per group)."""
    import torch

    from grpo_dial.core.advantage import advantages
    from grpo_dial.core.dial import dial_from_config

    dial = dial_from_config(dict(entry))
    reward, step, cell, length = _inputs(rows) if isinstance(rows, pd.DataFrame) else rows
    r = torch.tensor(reward, dtype=getattr(torch, dtype))  # (N,)
    ids, lengths = torch.tensor(cell), torch.tensor(length, dtype=r.dtype)  # (N,) each
    if entry.get("preset") not in BATCH_LEVEL:
        return advantages(r, ids, dial, lengths=lengths).double().numpy()
    out = np.empty(len(reward))
    for s in np.unique(step):
        at = step == s
        t = torch.tensor(at)
        out[at] = advantages(r[t], ids[t], dial, lengths=lengths[t]).double().numpy()
    return out


def dial_residual(responses: pd.DataFrame, entry: Mapping, dtype: str = "float64",
                  column: str = "advantage") -> tuple[float, int]:  # fmt: skip
    """(largest |A_logged - A_dial|, responses compared) of one dial entry."""
    rows = _logged(responses, column)
    if rows.empty:
        return math.nan, 0
    logged = pd.to_numeric(rows[column]).to_numpy(float)  # (N,)
    fit = ~_rounding_only(rows)  # (N,)
    gap = np.abs(dial_advantages(rows, entry, dtype) - logged)[fit]
    return (float(gap.max()) if fit.any() else math.nan), int(fit.sum())


def fit_advantages(responses: pd.DataFrame, column: str = "advantage") -> pd.DataFrame:
    """One row per candidate in float64, and for the FLOAT32_TRIED nearest also in float32
    (FIT_COLUMNS), best first (smallest max_residual); a candidate whose advantages equal an
    earlier one's in that dtype (Dr. GRPO under every std form) is left out."""
    rows = _logged(responses, column)
    if rows.empty:
        return pd.DataFrame(columns=list(FIT_COLUMNS))
    logged = pd.to_numeric(rows[column]).to_numpy(float)  # (N,)
    fit = ~_rounding_only(rows)  # (N,)
    if not fit.any():
        return pd.DataFrame(columns=list(FIT_COLUMNS))
    inputs = _inputs(rows)
    out, seen = [], []

    def add(label: str, entry: Mapping, dtype: str) -> None:
        try:
            a = dial_advantages(inputs, entry, dtype)
        except ValueError:  # a candidate this log cannot feed
            return
        if any(d == dtype and np.array_equal(a, b) for d, b in seen):
            return
        seen.append((dtype, a))
        shown = "{" + ", ".join(f"{k}: {v}" for k, v in entry.items()) + "}"
        out.append({"candidate": label, "dial": shown, "dtype": dtype, "entry": entry,
                    "max_residual": float(np.max(np.abs(a - logged)[fit])),
                    "responses": int(fit.sum())})  # fmt: skip

    for label, entry in candidates():
        add(label, entry, "float64")
    # the engines' dtype, for the FLOAT32_TRIED candidates nearest in float64
    for row in sorted(out, key=lambda r: r["max_residual"])[:FLOAT32_TRIED]:
        add(row["candidate"], row["entry"], "float32")
    for row in out:
        row.pop("entry")
    table = pd.DataFrame(out, columns=list(FIT_COLUMNS))
    return table.sort_values("max_residual", kind="stable").reset_index(drop=True)


def fit_line(table: pd.DataFrame) -> str:
    """One line: the best candidate with its largest residual, and the runner-up of another
    advantage (its residual)."""
    if table.empty:
        return "no logged advantages to fit"
    best = table.iloc[0]
    others = table[table["dial"] != best["dial"]]
    line = (f"{best['candidate']} {best['dial']} in {best['dtype']} fits the logged advantages of "
            f"{best['responses']} responses, largest residual {best['max_residual']:.2g}")
    if len(others):
        nxt = others.iloc[0]
        line += f"; next {nxt['candidate']} ({nxt['max_residual']:.2g})"
    return line


def disagreement(responses: pd.DataFrame, entry: Mapping | None, table: pd.DataFrame,
                 column: str = "advantage", tolerance: float = 1e-4) -> str | None:  # fmt: skip
    """A line when the config's dial `entry` misses the logged advantages by more than
    `tolerance` (in float64 and float32) where the best fit is within it; else None."""
    if entry is None or table.empty or table.iloc[0]["max_residual"] > tolerance:
        return None
    mine = min(dial_residual(responses, entry, dtype, column)[0]
               for dtype in ("float64", "float32"))  # fmt: skip
    if mine <= tolerance:
        return None
    best = table.iloc[0]
    return (f"the config and the numbers disagree: the config's dial misses the logged "
            f"advantages by up to {mine:.3g}, {best['candidate']} fits them to "
            f"{best['max_residual']:.2g}")


def float32_silent_groups(responses: pd.DataFrame, column: str = "advantage",
                          atol: float = 1e-6) -> str | None:  # fmt: skip
    """A warning line when silent groups (all rewards equal) whose reward binary cannot hold
    exactly (r * 2^k not an integer for k <= 8) carry logged advantages above `atol`: the
    engine's float32 arithmetic, not a signal (module docstring); None otherwise."""
    if column not in responses.columns or "raw_reward" not in responses.columns:
        return None
    df = responses[np.isfinite(pd.to_numeric(responses[column], errors="coerce"))]
    if df.empty:
        return None
    g = df.groupby(["step", "group"])
    spread = g["raw_reward"].agg(lambda r: float(r.max() - r.min()))
    size = g.size()
    reward = g["raw_reward"].first()
    top = g[column].agg(lambda a: float(np.max(np.abs(pd.to_numeric(a)))))
    dyadic = _dyadic(reward)
    hit = (spread == 0) & (size >= 2) & ~dyadic & (top > atol)
    if not hit.any():
        return None
    values = ", ".join(f"{v:g}" for v in sorted(reward[hit].unique())[:4])
    return (f"{int(hit.sum())} silent groups (all rewards equal, e.g. {values}, which binary "
            f"cannot hold) carry advantages up to {top[hit].max():.2g} where exact arithmetic "
            "gives 0: the engine computed them in float32 (verl does); they are rounding, not "
            "signal, and move the policy")

"""The aware tail's one-step probe: SGD's expected first step through the transformer, measured
at the base policy, against the closed form through the tail kernel.

Why. The dose-response sweep's SGD rate is sized so that the closed form through the kernel moves
the contrast readably (analysis/aware/dose.sgd_rate); but where the kernel's common direction
(K_ee, K_ec, K_cc) dwarfs its contrast direction (k_diff), at that rate the batch noise along the
common direction carries both tails into the nonlinear regime (to the generation cap) within tens
of steps. The probe needs no run: the first step's expectation is linear.

What. For one arm at one awareness level, B batches are drawn at the base policy by the trainer's
own step (train.loop.run_step: the level's task, the forced core, prompts_per_step x group_size,
the arm's advantage and normalizer), with SGD at learning rate 0 and no clipping, so the weights
never move and each batch leaves the raw gradient g_b = dL_b/dw in the weights' .grad. SGD's step
is -lr g_b, so per unit lr mode m's continue logit moves by

    dtheta_m,b = -J_m . g_b,      contrast_b = dtheta_~,b - dtheta_=,b,

with J_m the gradient of mode m's mean continue logit at the base
(analysis.aware.kernel.mode_gradients, the J behind aware/kernel.csv). The batches are i.i.d. (same
weights, fresh draws), so per (level, arm, quantity) `probe_table` gives the mean over batches, its
standard error sd / sqrt(B) and 90 % t interval, beside the prediction
(analysis.aware.dose.sgd_prediction: step_wrong = K_ee E[u_w] + K_ec E[u_c], step_correct = K_ec
E[u_w] + K_cc E[u_c], per step and unit lr); the mean of the clipped step's move (g_b scaled by
min(1, grad_clip / |g_b|), what the trainer's clipped SGD step takes) and the share of batches the
clip would cut; and each arm's ratio to the reference arm at the level, measured (its delta-method
SE, sd(x - R y) / (sqrt(B) |mean y|), valid for paired batches: every arm is probed with the same
seed, so keep-silent arms see the same batches) and predicted. `dose_fit` (analysis/aware/dose.py)
gives the slope of measured on predicted through the origin, R^2 and Spearman's rank correlation
over levels and arms.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np
import pandas as pd

from grpo_dial.analysis.seed_stats import t_interval

PROBE_BATCHES = 200  # batches per (level, arm), each one forward and backward of the policy
KEEP_BYTES = 2**31  # the batches' float64 gradients the probe holds at once; beyond, two passes


def probe_passes(batches: int, params: int, keep_bytes: int = KEEP_BYTES) -> int:
    """Passes over the probe's batches: 1 while `batches` float64 gradients of `params` weights
    fit in keep_bytes, else 2 (their squares' sum, then each batch projected)."""
    return 1 if batches * params * 8 <= keep_bytes else 2
QUANTITIES = ("wrong", "correct", "contrast")  # dtheta_~, dtheta_=, their difference
PROBE_COLUMNS = (
    "optimizer level a dial quantity n_batches mean se sd lo hi predicted ratio clipped_mean "
    "grad_norm clip_share ratio_reference ratio_reference_se predicted_ratio_reference"
).split()


def _ratio(x: float, y: float) -> float:
    """x / y, NaN where y is 0 or not finite (Dr. GRPO's exact-0 prediction)."""
    return x / y if y != 0 and math.isfinite(y) else math.nan


def mode_moves(grad, j_wrong, j_correct) -> tuple[float, float]:
    """(dtheta_~, dtheta_=) per unit lr of the SGD step -lr grad: (-J_~ . grad, -J_= . grad)."""
    return -float(j_wrong @ grad), -float(j_correct @ grad)


def check_kernel(j_wrong, j_correct, kernel: pd.DataFrame, rtol: float = 1e-3) -> None:
    """Raise in one line unless the J give aware/kernel.csv's K_ee, K_ec, K_cc and k_diff (within
    rtol): the probe must project on the kernel's own base sample."""
    from grpo_dial.analysis.aware.kernel import KERNEL, kernel_entries

    mine = kernel_entries(j_wrong, j_correct)
    for k in KERNEL:
        got, want = mine[k], float(kernel[k].iloc[0])
        if not np.isclose(got, want, rtol=rtol):
            raise ValueError(f"the probe's J give {k} = {got:.6g}, aware/kernel.csv {want:.6g}: "
                             "not the kernel's base sample")  # fmt: skip


def probe_table(batches: pd.DataFrame, predicted: pd.DataFrame, reference: str,
                grad_clip: float | None = None, level: float = 0.9) -> pd.DataFrame:  # fmt: skip
    """PROBE_COLUMNS per (level, dial, quantity) from `batches` (level, a, dial, batch, wrong,
    correct, contrast, grad_norm: probe_batches' rows with the cell's keys) and `predicted`
    (level, dial, wrong, correct: sgd_prediction's step_wrong / step_correct); module docstring.
    ratio: mean / predicted (NaN where the prediction is 0); the reference ratios NaN where
    `reference` was not probed."""
    need = {"level", "a", "dial", "batch", *QUANTITIES, "grad_norm"}
    if missing := sorted(need - set(batches.columns)):
        raise ValueError(f"probe batches lack column(s) {missing}")
    pred = predicted.assign(contrast=predicted["wrong"] - predicted["correct"])
    pred = pred.set_index(["level", "dial"])
    norm = batches["grad_norm"].to_numpy(dtype=float)
    scale = np.ones_like(norm) if grad_clip is None else np.minimum(1.0, grad_clip / norm)
    batches = batches.assign(scale=scale)
    rows = []
    for (lev, d), g in batches.groupby(["level", "dial"], sort=False):
        ref = batches[(batches["level"] == lev) & (batches["dial"] == reference)]
        ref = ref.set_index("batch")
        for q in QUANTITIES:
            x = g[q].to_numpy(dtype=float)
            s = t_interval(x, level)
            sd = float(np.nanstd(x, ddof=1)) if s.n > 1 else math.nan
            p = float(pred.loc[(lev, d), q]) if (lev, d) in pred.index else math.nan
            ratio, ratio_se, pred_ratio = math.nan, math.nan, math.nan
            if len(ref):
                y = ref[q].reindex(g["batch"]).to_numpy(dtype=float)
                ratio = _ratio(s.mean, float(np.nanmean(y)))
                ratio_se = _ratio(float(np.nanstd(x - ratio * y, ddof=1) / np.sqrt(s.n)),
                                  abs(float(np.nanmean(y))))  # fmt: skip
                if (lev, reference) in pred.index:
                    pred_ratio = _ratio(p, float(pred.loc[(lev, reference), q]))
            rows.append(
                {"optimizer": "sgd", "level": lev, "a": float(g["a"].iloc[0]), "dial": d,
                 "quantity": q, "n_batches": s.n, "mean": s.mean, "se": sd / np.sqrt(s.n),
                 "sd": sd, "lo": s.lo, "hi": s.hi, "predicted": p, "ratio": _ratio(s.mean, p),
                 "clipped_mean": float(np.nanmean(x * g["scale"].to_numpy())),
                 "grad_norm": float(np.nanmean(g["grad_norm"])),
                 "clip_share": float(np.mean(g["scale"] < 1)), "ratio_reference": ratio,
                 "ratio_reference_se": ratio_se, "predicted_ratio_reference": pred_ratio}
            )  # fmt: skip
    return pd.DataFrame(rows, columns=PROBE_COLUMNS)


def predictions(arms: Mapping, base: pd.DataFrame, kernel: pd.DataFrame, levels,
                options: Mapping, train: Mapping) -> pd.DataFrame:  # fmt: skip
    """One row per (level, dial): sgd_prediction's per-step move per unit lr of each mode
    (wrong = step_wrong, correct = step_correct); arms: dial -> its Dial."""
    from grpo_dial.analysis.aware.dose import sgd_prediction

    rows = []
    for lev in levels:
        for d, dial in arms.items():
            p = sgd_prediction(dial, base, kernel, lev, options, train)
            rows.append({"level": lev, "dial": d, "wrong": p["step_wrong"],
                         "correct": p["step_correct"]})  # fmt: skip
    return pd.DataFrame(rows)


__all__ = [
    "PROBE_BATCHES", "PROBE_COLUMNS", "QUANTITIES", "check_kernel", "mode_moves", "predictions",
    "probe_table",
]  # fmt: skip

"""The aware tail's dose-response: the closed form tested across awareness.

Levels (LEVELS, analysis/aware/grid.py): the mode's accuracies (P(right | "="), P(right | "~"))
= (0.5, 0.5), (0.6, 0.4), (0.7, 0.3), (0.8, 0.2), (0.9, 0.1) at estimate rate 1/2: pass rate 1/2
and awareness a = 1 - 2 P(right | "~") = 0, 0.2, 0.4, 0.6, 0.8 (data/tasks/aware.py). Each level
trains every arm of the config from the same base policy, with SGD and with AdamW, one seed per run.

SGD through the transformer (analysis.aware.kernel.tail_kernel, `sgd_prediction`). A mode's tail
parameter on the transformer is its continue logit l = log P(continue) - log P(EOS) (the sampler's
distribution), averaged over the decision positions of that mode's responses (each tail token
and the stop); J_m = dl_m / dw (w: every weight) at the base. If every position of mode m moved
with J_m, the surrogate's gradient would be J_~ g_~ + J_= g_= (g_m: the tabular gradient of
theta_m), and one SGD step would move the tails by

    dtheta_~ = lr (K_ee E[u_w] + K_ec E[u_c]),   dtheta_= = lr (K_ec E[u_w] + K_cc E[u_c]),

K = the kernel of J (K_ee = J_~ . J_~, K_ec = J_~ . J_=, K_cc = J_= . J_=; k_diff = |J_~ - J_=|^2,
the part that can move one mode against the other) and E[u] the closed form
(core/length_drift.tail_drift) at the level's p and a and the base tails. Over S updates at the base
state (in `sweep_runs` S is the mean count of updates behind the last window's samples,
aware.window_updates): a first-order prediction, in theta; in tokens dT = T_base dtheta
(E[T] = e^theta), in L = log(1 + T): dL = q dtheta (q = T / (1 + T)). `sgd_rate` sizes SGD's
learning rate so that this predicts a contrast of SGD_TARGET (theta) for the reference arm at the
reference level: the closed form's magnitude can then be read off the runs directly. Which weights
SGD moves is the config's `aware_sweep.sgd_weights` (policy.masks.weight_masks), and J, K and
the rate are those weights' (`kernel_of`): where K's common direction (K_ec) dwarfs its
contrast direction (k_diff), the sized rate lets batch noise along the common direction carry both
tails to the cap (docs/length-bias.md#the-aware-tail). AdamW's rate is sized from the same
kernel: its first step moves every weight by about lr, so the tail's continue logit by up to
lr |J|_1, the same in both modes (the common direction dominates J); lr_adam = ADAM_STEP / |J|_1
keeps that move at ADAM_STEP.

Adam (`push_snr`): each coordinate's step is about lr E[g] / sqrt(E[g^2]), so the prediction is
the push's signal-to-noise ratio per batch (analysis/aware/tabular.push_moments, common random
numbers across arms; the forced core rounded to whole tokens), which sets the drift's size up to
a scale the transformer's many coordinates set; `pred_adam` is that drift if theta_m were one Adam
coordinate: S lr snr / sqrt(1 + snr^2) per mode.

The tail-frozen control (FROZEN): the reference arm's sampling and rewards with zero loss weight
on the tail. The task's core is forced and already weighted 0 (data/tasks/aware.py), so no token
keeps a weight: the gradient is 0, and SGD and AdamW (weight decay 0, no KL) take a zero step, which
analysis.aware.kernel.train_cell runs as learning rate 0 (the same update; the step's grad_norm is
still logged). It is trained once, with AdamW at REFERENCE_LEVEL (a zero step depends on
neither), and predicted 0: what its tails do is what the measure does without any update, so every
other arm's common drift (d_common) beyond it is the updates' own. Every run is measured against
one base sample (aware/base.csv), so that sample's error is one offset shared by every cell and
seed, which intervals over seeds do not see; the control measures it. `net`: a cell's mean minus
the control's, with Welch's interval over both arms' seeds (seed_stats.difference_interval).

`dose_table`: per optimizer, level, arm and quantity, the seed mean with its 90 % t interval, the
sign and Wilcoxon tests over seeds, the take-offs with Fisher's p against the same arm and
optimizer at a = 0, beside the predictions and the mean net of the control; `dose_fit` the
measured-on-predicted slope through the origin, R^2 and Spearman's rank correlation over levels
and arms per optimizer, and the least-squares line with an intercept (which, if the shared offset
is all that the origin misses, finds the control's value); its markdown:
analysis/aware/dose_report.py. The transformer's parts (the base policy, the kernel, a cell's
training): analysis/aware/kernel.py.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd
from scipy import stats

from grpo_dial.analysis.aware.grid import (
    BLIND_LEVEL,
    FROZEN,
    FROZEN_CELL,
    LEVELS,
    REFERENCE_LEVEL,
)
from grpo_dial.analysis.aware.runs import STEP_COLUMNS, run_drift, window_updates
from grpo_dial.analysis.aware.seeds import bh_adjust, fisher_p, rank_tests
from grpo_dial.analysis.seed_stats import (
    detectable_shift,
    difference_interval,
    r_squared,
    rejection_power,
    sample_se,
    t_interval,
)

SGD_TARGET = 0.2  # the reference arm's predicted contrast over the run (theta), sizing SGD's rate
ADAM_STEP = 0.1  # theta moved by Adam's first step if every weight moved by lr along sign(J)
SNR_BATCHES = 2000  # Monte Carlo batches per arm and level (push_snr)


def level_awareness(level: str, estimate_rate: float = 0.5) -> tuple[float, float]:
    """(p, a) of a level: the task's own numbers (data/tasks/aware.Awareness)."""
    from grpo_dial.data.tasks.aware import AwareTask

    compute, estimate = LEVELS[level]
    aw = AwareTask(
        compute_accuracy=compute, estimate_accuracy=estimate, estimate_rate=estimate_rate
    ).awareness()
    return aw.p, aw.awareness


# --------------------------------------------------------------------------- predictions


def _base_state(base: pd.DataFrame, level: str, options: Mapping) -> pd.DataFrame:
    """The base policy's tails and core at the level's p and a (the task's numbers)."""
    p, a = level_awareness(level, float(options.get("estimate_rate", 0.5)))
    row = base.iloc[0]
    return pd.DataFrame(
        [{"accuracy": p, "awareness": a, "core": row["core"],
          "tail_estimate": row["tail_estimate"], "tail_compute": row["tail_compute"]}]
    )  # fmt: skip


def kernel_of(kernel: pd.DataFrame, weights: str = "all") -> pd.DataFrame:
    """The one-row kernel of the weights setting `weights` (analysis.aware.kernel.SGD_WEIGHTS) from
    aware/kernel.csv; a table without a `weights` column is the kernel of every weight."""
    if "weights" not in kernel:
        if weights != "all":
            raise ValueError(f"the kernel table has no 'weights' column, so no {weights!r} row: "
                             "rerun rule aware_base")  # fmt: skip
        return kernel.iloc[[0]]
    rows = kernel[kernel["weights"] == weights]
    if rows.empty:
        have = ", ".join(map(str, kernel["weights"]))
        raise ValueError(f"aware/kernel.csv has no row for weights {weights!r} (it has {have}): "
                         "rerun rule aware_base")  # fmt: skip
    return rows.iloc[[0]]


def sgd_prediction(
    dial, base: pd.DataFrame, kernel: pd.DataFrame, level: str, options: Mapping, train: Mapping
) -> dict[str, float]:
    """Per step and unit lr at the base state: dtheta_~, dtheta_= (module docstring), through
    the first row of `kernel` (`kernel_of` picks the row of the weights SGD moves)."""
    from grpo_dial.analysis.aware.runs import predicted_step

    state = _base_state(base, level, options)
    uw, uc = predicted_step(state, dial, int(train["group_size"]), int(train["prompts_per_step"]))
    k = kernel.iloc[0]
    return {
        "u_wrong": float(uw[0]), "u_correct": float(uc[0]),
        "step_wrong": float(k["k_ee"] * uw[0] + k["k_ec"] * uc[0]),
        "step_correct": float(k["k_ec"] * uw[0] + k["k_cc"] * uc[0]),
    }  # fmt: skip


def sgd_rate(dial, base: pd.DataFrame, kernel: pd.DataFrame, train: Mapping, options: Mapping,
             sgd_weights: str = "all") -> pd.DataFrame:  # fmt: skip
    """One row: the SGD learning rate lr = SGD_TARGET / (steps x per-step contrast per unit lr)
    of `dial` at REFERENCE_LEVEL through the kernel of the weights SGD moves (`sgd_weights`);
    AdamW's lr_adam = ADAM_STEP / |J|_1 of every weight (the mean over modes; the first Adam
    step moves each weight by about lr, so lr |J|_1 bounds the tail logit's first move); and
    the numbers behind them (the SGD kernel's)."""
    sgd_kernel = kernel_of(kernel, sgd_weights)
    pred = sgd_prediction(dial, base, sgd_kernel, REFERENCE_LEVEL, options, train)
    per_step = pred["step_wrong"] - pred["step_correct"]
    if not per_step > 0:
        raise ValueError(
            f"the reference arm's predicted contrast per step is {per_step:.3g}, not > 0: "
            "choose a reference arm with a push (GRPO)"
        )
    steps = int(train["steps"])
    every = kernel_of(kernel, "all").iloc[0]
    l1 = float((every["l1_estimate"] + every["l1_compute"]) / 2)
    k = sgd_kernel.iloc[0].drop("weights", errors="ignore")
    return pd.DataFrame(
        [{"lr": SGD_TARGET / (steps * per_step), "lr_adam": ADAM_STEP / l1,
          "sgd_weights": sgd_weights, "target": SGD_TARGET, "adam_step": ADAM_STEP,
          "steps": steps, "level": REFERENCE_LEVEL, "contrast_per_step": per_step, **pred,
          **k.to_dict()}]
    )  # fmt: skip


def push_snr(dial, options: Mapping, base: pd.DataFrame, train: Mapping,
             level: str | None = None, batches: int = SNR_BATCHES) -> dict[str, float]:  # fmt: skip
    """analysis.aware.tabular.push_moments at the base policy's tails and core (forced tokens)
    for the task's accuracies, or a LEVELS level's; the same draws for every arm (seed 0)."""
    from grpo_dial.analysis.aware.tabular import push_moments
    from grpo_dial.data.tasks.aware import AwareTask

    task = AwareTask(**options)
    compute, estimate = LEVELS[level] if level else (task.compute_accuracy, task.estimate_accuracy)
    row = base.iloc[0]
    theta = tuple(float(np.log(max(row[f"tail_{m}"], 1e-3))) for m in ("compute", "estimate"))
    return push_moments(
        dial, compute_accuracy=compute, estimate_accuracy=estimate,
        estimate_rate=task.estimate_rate, core=max(int(round(row["core"])) - 1, 1), theta=theta,
        groups=int(train["prompts_per_step"]), group_size=int(train["group_size"]),
        batches=batches, seed=0,
    )  # fmt: skip


# --------------------------------------------------------------------------- tables


def sweep_runs(cells: pd.DataFrame, base: pd.DataFrame, kernel: pd.DataFrame, sgd_lr: float,
               arms: Mapping, train: Mapping, options: Mapping, fraction: float,
               sgd_weights: str = "all") -> pd.DataFrame:  # fmt: skip
    """One row per (optimizer, level, dial, seed): analysis/aware.run_drift against the base,
    the level's awareness, and the predictions over the updates behind the run's last window
    (module docstring); the FROZEN arm (trained with
    `arms[FROZEN]`'s dial at learning rate 0) is predicted 0 with a push SNR of 0."""
    from grpo_dial.core.dial import arm_from_fields

    rows, pushes = [], {}
    sgd_kernel = kernel_of(kernel, sgd_weights)
    t_e, t_c = float(base["tail_estimate"].iloc[0]), float(base["tail_compute"].iloc[0])
    for (opt, level, d, seed), s in cells.groupby(["optimizer", "level", "dial", "seed"]):
        dial = arm_from_fields(arms[d]).dial
        lr = 0.0 if d == FROZEN else sgd_lr if opt == "sgd" else float(train["lr"])
        steps = s.sort_values("step")[list(STEP_COLUMNS)]
        drift = run_drift(steps, s[["grad_norm"]], dial, int(train["group_size"]),
                          int(train["prompts_per_step"]), lr, train.get("grad_clip"), fraction,
                          base)  # fmt: skip
        if (level, d) not in pushes:
            sgd = sgd_prediction(dial, base, sgd_kernel, level, options, train)
            snr = push_snr(dial, options, base, train, level)
            if d == FROZEN:
                snr = dict.fromkeys(snr, 0.0)
            pushes[(level, d)] = (sgd, snr)
        sgd, snr = pushes[(level, d)]
        n = window_updates(steps, fraction)  # the updates behind the last window's samples
        we, wc = sgd["step_wrong"] * lr * n, sgd["step_correct"] * lr * n
        adam = {m: n * lr * snr[f"snr_{m}"] / np.sqrt(1 + snr[f"snr_{m}"] ** 2)
                for m in ("wrong", "correct")}  # fmt: skip
        # the SGD closed form through the kernel (theta, then L and tokens); under Adam one
        # coordinate's drift (each NaN under the other optimizer) and the push's SNR
        sg = 1.0 if opt == "sgd" else np.nan
        ad = 1.0 if opt != "sgd" else np.nan
        rows.append(
            {"optimizer": opt, "level": level, "a": level_awareness(level)[1], "dial": d,
             "seed": int(seed), "lr": lr, "updates": n, **drift,
             "pred_theta_wrong": sg * we, "pred_theta_correct": sg * wc,
             "pred_contrast": sg * (t_e / (1 + t_e) * we - t_c / (1 + t_c) * wc),
             "pred_d_wrong": sg * t_e / (1 + t_e) * we,
             "pred_contrast_tokens": sg * (t_e * we - t_c * wc),
             "pred_d_wrong_tokens": sg * t_e * we,
             "pred_d_correct_tokens": sg * t_c * wc,
             "snr_contrast": snr["snr_contrast"], "snr_wrong": snr["snr_wrong"],
             "snr_correct": snr["snr_correct"],
             "adam_contrast": ad * (t_e / (1 + t_e) * adam["wrong"]
                                    - t_c / (1 + t_c) * adam["correct"]),
             "adam_d_wrong": ad * t_e / (1 + t_e) * adam["wrong"],
             "adam_contrast_tokens": ad * (t_e * adam["wrong"] - t_c * adam["correct"]),
             "adam_d_wrong_tokens": ad * t_e * adam["wrong"],
             "adam_d_correct_tokens": ad * t_c * adam["correct"]}
        )  # fmt: skip
    return pd.DataFrame(rows)


def adam_first_order(runs: pd.DataFrame, batches: pd.DataFrame, base: pd.DataFrame
                     ) -> pd.DataFrame:  # fmt: skip
    """`runs` with Adam's first-order prediction of its AdamW rows (adam1_contrast_tokens,
    adam1_d_wrong_tokens, adam1_d_correct_tokens; NaN under SGD and for a cell the probe did not
    draw): each weight steps about -lr E[g] / sqrt(E[g^2]), so over the run's updates mode m's
    tail moves by updates x lr x the probe's mean adam_m (per step and unit lr, at the base;
    backends/own_cells.adam_moves), in tokens T_m times that; the control (lr 0) by 0."""
    t_e, t_c = float(base["tail_estimate"].iloc[0]), float(base["tail_compute"].iloc[0])
    cols = ["adam_wrong", "adam_correct"]
    moves = batches.groupby(["level", "dial"], as_index=False)[cols].mean()
    per_step = runs[["level", "dial"]].merge(moves, how="left", on=["level", "dial"])
    scale = (runs["lr"] * runs["updates"]).to_numpy(dtype=float)
    adam = (runs["optimizer"] != "sgd").to_numpy()
    still = (runs["lr"] == 0).to_numpy()  # the control: a zero step, whatever the probe drew
    w, c = (np.where(still, 0.0, per_step[m].to_numpy(dtype=float) * scale)
            for m in ("adam_wrong", "adam_correct"))  # fmt: skip
    w, c = np.where(adam, w, np.nan), np.where(adam, c, np.nan)
    return runs.assign(adam1_contrast_tokens=t_e * w - t_c * c, adam1_d_wrong_tokens=t_e * w,
                       adam1_d_correct_tokens=t_c * c)  # fmt: skip


DOSE_QUANTITIES = (
    "contrast_tokens", "d_wrong_tokens", "d_correct_tokens", "contrast", "d_wrong", "d_common",
)  # fmt: skip
DOSE_COLUMNS = (
    "optimizer level a dial quantity n_seeds mean lo hi min max net net_lo net_hi "
    "n_pos n_neg sign_p wilcoxon_p wilcoxon_bh n_up n_down takeoff_p "
    "predicted adam_tabular adam_first_order snr detectable power power_first_order "
    "awareness_measured truncation_last"
).split()
POWER = 0.8  # the power at which `detectable` is stated


def _snr_column(quantity: str) -> str:
    """The push SNR column that predicts `quantity` under Adam."""
    return next((f"snr_{m}" for m in ("wrong", "correct") if f"d_{m}" in quantity),
                "snr_contrast")  # fmt: skip


def dose_table(runs: pd.DataFrame, level: float = 0.9) -> pd.DataFrame:
    """DOSE_COLUMNS per optimizer, level, dial and quantity (module docstring). predicted: the
    SGD closed form through the kernel at the run's learning rate (NaN for d_common, whose
    first-order prediction is only the kernel's asymmetry); adam_tabular: one Adam coordinate's
    drift; snr: of the contrast push (of the wrong-mode push for d_wrong*); wilcoxon_bh: the
    Wilcoxon p adjusted (Benjamini-Hochberg) over the levels of one optimizer, arm and quantity,
    since "is this arm off 0 anywhere on the sweep" reads five tests at once; net, net_lo,
    net_hi: the mean minus the FROZEN control's (its seeds, whatever its optimizer: a zero step
    is the same under both) with Welch's interval, NaN for the control and without one;
    detectable: the smallest mean the t test over seeds tells from 0 at POWER (two-sided, at
    1 - level), power: its chance to tell the prediction (SGD: predicted, AdamW: adam_tabular)
    from 0 (seed_stats.detectable_shift, rejection_power, at the cell's own seed spread);
    adam_first_order, power_first_order: Adam's first-order prediction (`adam_first_order`, when
    `runs` carries it) and the seeds' power against it."""
    rows = []
    control = runs[runs["dial"] == FROZEN]
    for (opt, lev, d), g in runs.groupby(["optimizer", "level", "dial"], sort=False):
        blind = runs[(runs["optimizer"] == opt) & (runs["level"] == BLIND_LEVEL)
                     & (runs["dial"] == d)]  # fmt: skip
        up, down = int((g["takeoff"] > 0).sum()), int((g["takeoff"] < 0).sum())
        takeoff_p = (
            fisher_p(up, len(g), int((blind["takeoff"] > 0).sum()), len(blind))
            if lev != BLIND_LEVEL and len(blind) else float("nan")
        )  # fmt: skip
        for q in DOSE_QUANTITIES:
            x = g[q].to_numpy(dtype=float)
            s = t_interval(x, level)
            pred = f"pred_{q}" if f"pred_{q}" in g else None
            adam = f"adam_{q}" if f"adam_{q}" in g else None
            net, net_lo, net_hi = (difference_interval(x, control[q], level)
                                   if d != FROZEN and len(control) else (np.nan,) * 3)  # fmt: skip
            se, df = sample_se(x)
            tested = pred if opt == "sgd" else adam  # the prediction this optimizer's runs test
            expected = float(g[tested].mean()) if tested else float("nan")
            first = float(g[f"adam1_{q}"].mean()) if f"adam1_{q}" in g else float("nan")
            rows.append(
                {"optimizer": opt, "level": lev, "a": float(g["a"].iloc[0]), "dial": d,
                 "quantity": q, "n_seeds": len(g), "mean": s.mean, "lo": s.lo, "hi": s.hi,
                 "min": s.low, "max": s.high, "net": net, "net_lo": net_lo, "net_hi": net_hi,
                 **rank_tests(x), "n_up": up, "n_down": down, "takeoff_p": takeoff_p,
                 "predicted": float(g[pred].mean()) if pred else float("nan"),
                 "adam_tabular": float(g[adam].mean()) if adam else float("nan"),
                 "snr": float(g[_snr_column(q)].mean()) if _snr_column(q) in g else np.nan,
                 "detectable": detectable_shift(se, df, level, POWER),
                 "power": rejection_power(expected, se, df, level),
                 "adam_first_order": first,
                 "power_first_order": rejection_power(first, se, df, level),
                 "awareness_measured": float(g["awareness"].mean()),
                 "truncation_last": float(g["truncation_last"].max())}
            )  # fmt: skip
    out = pd.DataFrame(rows, columns=DOSE_COLUMNS)
    family = out.groupby(["optimizer", "dial", "quantity"], sort=False)["wilcoxon_p"]
    out["wilcoxon_bh"] = family.transform(bh_adjust)
    return out


FIT_COLUMNS = (
    "optimizer", "quantity", "predictor", "slope", "r2", "spearman", "spearman_p", "slope_affine",
    "intercept", "r2_affine", "n",
)  # fmt: skip


def dose_fit(dose: pd.DataFrame) -> pd.DataFrame:
    """Per optimizer and quantity, over every (level, arm) cell: the least-squares slope of the
    measured mean on the prediction through the origin, its R^2 and Spearman's rank correlation,
    and the least-squares line with an intercept (slope_affine, intercept, r2_affine). The
    predictor is the SGD closed form under SGD and the SNR under Adam."""
    rows = []
    for (opt, q), g in dose.groupby(["optimizer", "quantity"], sort=False):
        predictor = "predicted" if opt == "sgd" else "snr"
        ok = g[[predictor, "mean"]].dropna()
        if len(ok) < 3:
            continue
        x, y = ok[predictor].to_numpy(dtype=float), ok["mean"].to_numpy(dtype=float)
        slope = float(x @ y / (x @ x)) if x @ x > 0 else float("nan")
        if np.ptp(x) == 0 or np.ptp(y) == 0:
            continue
        rho = stats.spearmanr(x, y)
        line = stats.linregress(x, y)
        rows.append(
            {"optimizer": opt, "quantity": q, "predictor": predictor, "slope": slope,
             "r2": r_squared(y, slope * x), "spearman": float(rho.statistic),
             "spearman_p": float(rho.pvalue), "slope_affine": float(line.slope),
             "intercept": float(line.intercept), "r2_affine": float(line.rvalue**2), "n": len(ok)}
        )  # fmt: skip
    return pd.DataFrame(rows, columns=list(FIT_COLUMNS))


__all__ = [
    "BLIND_LEVEL", "FROZEN", "FROZEN_CELL", "LEVELS", "REFERENCE_LEVEL", "SGD_TARGET",
    "adam_first_order", "dose_fit", "dose_table", "kernel_of", "level_awareness", "push_snr",
    "sgd_prediction", "sgd_rate", "sweep_runs",
]  # fmt: skip

"""The aware-tail runs against the closed form (task data/tasks/aware.py).

Lengths are tokens throughout. Per step of a run (`step_table`, first-round responses of
responses.parquet): the tail T = |o| minus the forced core's tokens (the logged `prefix`, one token
per character) minus the EOS of a finished response, by mode ("~" estimate, "=" compute) and by
correctness, the pass rate p, the measured awareness a = P(~ | wrong) - P(~ | correct), the
within-group AUC of the tail for wrongness (analysis/channel.py), the core's tokens c = |o| - T
and the truncated share. The base policy is sampled apart at step 0, before any update
(stage aware_base): its one-row step table is every run's reference.

The metric (`log_tail`): a window's mean tail of a mode, T_m = the tail pooled over the window's
responses of that mode, and L_m = log(1 + T_m). A run's drift is

    d_wrong = L_~(last window) - L_~(base),   d_correct = L_=(last) - L_=(base),

its contrast d_wrong - d_correct and its common drift (d_wrong + d_correct) / 2; the same in
tokens (T_m(last) - T_m(base)). log(1 + T) is 0 for a tail that collapsed to nothing, so a seed
whose tails both collapse scores about -log(1 + T_base) in each mode, not a floor set by the
window's response count. A seed "took off" when its contrast passed +TAKEOFF (up) or -TAKEOFF.

Prediction (`predicted_step`): core/length_drift.tail_drift per group at the state's measured p,
a, q_mode = E[T|mode] / (1 + E[T|mode]) and mean c, for the arm's normalizer (sequence; token
over the batch's prompts_per_step groups, with DAPO's redraws when the arm drops silent groups;
constant), its std power, ddof and eps. With SGD on a tabular theta = log E[T | mode] the
expected step is lr x tail_drift (`pred_wrong` = lr x steps x E[u_w] at the base state): the
closed form's magnitude is an SGD prediction. Under Adam each coordinate's step is about
lr E[g] / sqrt(E[g^2]): the prediction is the push's signal-to-noise ratio, E[g] / sd(g) of one
batch's gradient (analysis/aware/tabular.push_moments, Monte Carlo through the trainer's own
advantage and normalizer code), and `ratio_snr` is an arm's SNR over the reference arm's
(analysis/aware/seeds.drift_table).

Over seeds: analysis/aware/seeds.py; the summary lines: analysis/aware/section.py.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from grpo_dial.analysis.channel import within_group_auc
from grpo_dial.core.dial import Dial
from grpo_dial.core.length_drift import tail_drift

ESTIMATE, COMPUTE = "~", "="
TAKEOFF = 0.5  # |contrast| in log(1 + tokens) that counts as a seed taking off
STEP_COLUMNS = (
    "step n accuracy awareness pi_wrong pi_correct auc_tail core tail tail_estimate tail_compute "
    "tail_wrong tail_correct theta_estimate theta_compute truncation n_estimate n_compute "
    "n_wrong n_correct"
).split()


def _mean(x: np.ndarray) -> float:
    return float(x.mean()) if len(x) else float("nan")


def log_tail(tokens) -> np.ndarray | float:
    """L = log(1 + T): 0 for an empty tail, log E[T] for a long one."""
    return np.log1p(tokens)


def step_table(responses: pd.DataFrame) -> pd.DataFrame:
    """One row per step (STEP_COLUMNS) from a run's responses table with a `prefix` column."""
    need = ["step", "group", "reward", "tokens", "prefix", "truncated"]
    missing = [c for c in need if c not in responses.columns]
    if missing:
        raise ValueError(f"responses table lacks column(s) {missing} (not an aware-task run?)")
    df = responses
    if "resample_round" in df:
        df = df[df["resample_round"] == 0]
    rows = []
    for step, d in df.groupby("step", sort=True):
        mode = d["prefix"].astype(str).str[:1].to_numpy()
        est = mode == ESTIMATE
        wrong = d["reward"].to_numpy() == 0
        finished = ~d["truncated"].to_numpy(dtype=bool)
        core = d["prefix"].astype(str).str.len().to_numpy() + finished  # one token per character
        t = np.maximum(d["tokens"].to_numpy(dtype=float) - core, 0.0)
        te, tc = _mean(t[est]), _mean(t[mode == COMPUTE])
        pw, pc = _mean(est[wrong].astype(float)), _mean(est[~wrong].astype(float))
        rows.append(
            {
                "step": int(step),
                "n": len(d),
                "accuracy": float(1 - wrong.mean()),
                "awareness": pw - pc,
                "pi_wrong": pw,
                "pi_correct": pc,
                "auc_tail": within_group_auc(d["group"].to_numpy(), wrong, t),
                "core": float(core.mean()),
                "tail": float(t.mean()),
                "tail_estimate": te,
                "tail_compute": tc,
                "tail_wrong": _mean(t[wrong]),
                "tail_correct": _mean(t[~wrong]),
                "theta_estimate": float(np.log(te)) if te > 0 else float("nan"),
                "theta_compute": float(np.log(tc)) if tc > 0 else float("nan"),
                "truncation": float((~finished).mean()),
                "n_estimate": int(est.sum()),
                "n_compute": int((mode == COMPUTE).sum()),
                "n_wrong": int(wrong.sum()),
                "n_correct": int((~wrong).sum()),
            }
        )
    return pd.DataFrame(rows, columns=STEP_COLUMNS)


def _q(tail_mean: np.ndarray) -> np.ndarray:
    """The geometric continue probability with mean tail_mean, kept inside (0, 1)."""
    m = np.clip(np.asarray(tail_mean, dtype=float), 1e-3, 1e3)
    return m / (1 + m)


def predicted_step(
    steps: pd.DataFrame, dial: Dial, group_size: int, groups: int
) -> tuple[np.ndarray, np.ndarray]:
    """(E[u_w], E[u_c]) per step (S,): the closed form's per-group update of theta_~ and theta_=
    at each step's measured state (module docstring); NaN at a step whose state is not finite (no
    response of a class). A learnable lambda starts at 0 = the token mean, so lambda-GRPO is
    predicted as the token mean (its later lambda is in steps.parquet)."""
    norm = {"sequence": "sequence", "constant": "constant"}.get(dial.length_norm, "token")
    cols = ["awareness", "accuracy", "tail_estimate", "tail_compute", "core"]
    x = steps[cols].to_numpy(dtype=float)  # (S, 5)
    ok = np.isfinite(x).all(1)  # a step without a class (every response wrong) has no state
    uw, uc = np.full(len(x), np.nan), np.full(len(x), np.nan)
    if not ok.any():
        return uw, uc
    a = np.clip(x[ok, 0], 0.0, 1.0)  # the model needs a >= 0
    drift = tail_drift(
        np.clip(x[ok, 1], 0.0, 1.0),
        _q(x[ok, 2]),
        _q(x[ok, 3]),
        np.maximum(x[ok, 4], 1.0),
        group_size,
        std_power=float(dial.std_power),
        length_norm=norm,
        awareness=a,
        scope="batch" if norm == "token" else "group",
        n_groups=int(groups),
        ddof=int(dial.std_ddof),
        eps=float(dial.eps),
        silent=dial.silent,
        max_resample_rounds=int(dial.max_resample_rounds) if dial.silent == "drop" else 0,
    )
    uw[ok], uc[ok] = np.asarray(drift.wrong), np.asarray(drift.correct)
    return uw, uc


def _window(steps: pd.DataFrame, fraction: float) -> tuple[pd.DataFrame, pd.DataFrame]:
    n = max(1, int(round(len(steps) * fraction)))
    s = steps.sort_values("step")
    return s.head(n), s.tail(n)


def window_updates(steps: pd.DataFrame, fraction: float) -> float:
    """The mean number of updates behind the last window's responses: step k samples before
    its update, so its responses come from k - 1 updates (the last 12 of 60 steps: 53.5)."""
    return float((_window(steps, fraction)[1]["step"] - 1).mean())


def window_tail(window: pd.DataFrame, key: str) -> float:
    """The mean tail (tokens) of one class over a window of steps: each step's mean tail of
    `key` (estimate, compute, wrong, correct) weighted by its n_<key> responses; NaN without any."""
    n = window[f"n_{key}"].to_numpy(dtype=float)  # (S,)
    t = window[f"tail_{key}"].to_numpy(dtype=float)
    ok = n > 0
    total = float(n[ok].sum())
    return float((t[ok] * n[ok]).sum() / total) if total > 0 else float("nan")


def _state(window: pd.DataFrame) -> pd.DataFrame:
    """A window as one state row for predicted_step: pooled tails, mean p, a and core."""
    row = window[["accuracy", "awareness", "core"]].mean().to_dict()
    row |= {f"tail_{m}": window_tail(window, m) for m in ("estimate", "compute")}
    return pd.DataFrame([row])


def run_drift(
    steps: pd.DataFrame,
    train_steps: pd.DataFrame,
    dial: Dial,
    group_size: int,
    groups: int,
    lr: float,
    grad_clip: float | None,
    fraction: float = 0.2,
    base: pd.DataFrame | None = None,
) -> dict:
    """One run's tails and drifts (module docstring): the last window of `fraction` of the steps
    against `base` (the base policy's step table, step 0; None: the run's first window), and the
    closed form's SGD prediction lr x steps x E[u] at the reference state."""
    first, last = _window(steps, fraction)
    ref = first if base is None or not len(base) else base
    tails = {
        f"tail_{k}_{w}": window_tail(frame, k)
        for w, frame in (("base", ref), ("first", first), ("last", last))
        for k in ("estimate", "compute", "wrong", "correct")
    }
    te, tc = tails["tail_estimate_last"], tails["tail_compute_last"]
    te0, tc0 = tails["tail_estimate_base"], tails["tail_compute_base"]
    d = {
        "d_wrong": float(log_tail(te) - log_tail(te0)),
        "d_correct": float(log_tail(tc) - log_tail(tc0)),
        "d_wrong_tokens": te - te0,
        "d_correct_tokens": tc - tc0,
        "d_tail_wrong_resp": tails["tail_wrong_last"] - tails["tail_wrong_base"],
        "d_tail_correct_resp": tails["tail_correct_last"] - tails["tail_correct_base"],
    }
    d["contrast"] = d["d_wrong"] - d["d_correct"]
    d["contrast_tokens"] = d["d_wrong_tokens"] - d["d_correct_tokens"]
    d["d_common"] = (d["d_wrong"] + d["d_correct"]) / 2
    c = d["contrast"]
    d["takeoff"] = int(np.sign(c)) if np.isfinite(c) and abs(c) > TAKEOFF else 0
    uw, uc = predicted_step(_state(ref), dial, group_size, groups)
    g = train_steps["grad_norm"].to_numpy(dtype=float) if len(train_steps) else np.array([np.nan])
    g = g[np.isfinite(g)]
    f, la = first.mean(numeric_only=True), last.mean(numeric_only=True)
    return {
        **d,
        **tails,
        "pred_wrong": float(lr * len(steps) * uw[0]),
        "pred_correct": float(lr * len(steps) * uc[0]),
        "u_wrong": float(uw[0]),
        "u_correct": float(uc[0]),
        "grad_norm": float(np.median(g)) if len(g) else float("nan"),
        "clip_share": float((g > grad_clip).mean()) if grad_clip and len(g) else 0.0,
        "awareness": float(steps["awareness"].mean()),
        "accuracy": float(steps["accuracy"].mean()),
        "auc_tail_first": float(f["auc_tail"]),
        "auc_tail_last": float(la["auc_tail"]),
        "truncation_base": float(ref["truncation"].mean()),
        "truncation_first": float(f["truncation"]),
        "truncation_last": float(la["truncation"]),
    }


DECOMPOSITION_TERMS = ("total", "mix", "within_correct", "within_incorrect")


def run_decomposition(
    responses: pd.DataFrame, fraction: float = 0.2, base: pd.DataFrame | None = None
) -> dict:
    """The length change of one run in tokens split into mix / within correct / within incorrect
    (analysis/decompose.decompose): the last window of `fraction` of the steps against `base`
    (the base policy's responses at step 0), or against the first window when None."""
    from grpo_dial.analysis.training.decompose import decompose

    steps = np.sort(responses["step"].unique())
    n = max(1, int(round(len(steps) * fraction)))
    after = steps[-n:]
    if base is not None and len(base):
        cols = [c for c in responses.columns if c in base.columns]
        frame = pd.concat([base[cols].assign(step=-1), responses[cols]], ignore_index=True)
        terms = decompose(frame, [-1], after, length="tokens")
    else:
        terms = decompose(responses, steps[:n], after, length="tokens")
    return {q: float(terms[q]) for q in DECOMPOSITION_TERMS}

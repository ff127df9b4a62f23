"""The aware-tail runs against the closed form (issue 27; task data/tasks/aware.py).

Per step of a run (`step_table`, first-round responses of responses.parquet): the tail T in
tokens (|o| minus the forced core's tokens, the logged `prefix`, minus the EOS of a finished
response; characters would count a special token the policy emits as its 5 printed characters)
by mode ("~" estimate, "=" compute) and by correctness, the pass rate p, the measured awareness
a = P(~ | wrong) - P(~ | correct), the within-group AUC of the tail for wrongness
(analysis/channel.py) and the core's tokens c = |o| - T (mode, answer and EOS). The tail
parameters of the closed form's model are theta = log E[T | mode] (a geometric tail has
E[T] = e^theta), so a run's drift is

    d_wrong = theta_~(last window) - theta_~(first window),   d_correct likewise for "=",

and its contrast d_wrong - d_correct; a window's theta pools the tail over the window's responses
of that mode with half a token added (`window_theta`), so a tail collapsed to 0 has a finite floor.
Prediction (`predicted_step`): core/length_drift.tail_drift
per group at the step's measured p, a, q_mode = E[T|mode] / (1 + E[T|mode]) and mean c, for the
arm's normalizer (sequence; token over the batch's prompts_per_step groups, with DAPO's redraws
when the arm drops silent groups; constant), its std power, ddof and eps. The trainer's batch
update of a tail parameter is the mean over groups of the closed form's per-group update (every
normalizer's batch weight is 1/M of the per-group one), so with SGD on a tabular theta the
expected step is lr x tail_drift: `predicted_drift` sums it over the first steps' state.

What Adam does (measured, not assumed): AdamW divides each coordinate by the root mean square of
its recent gradients, so an arm's drift is set by its mean update over its gradient's size, not
by the mean alone. `drift_table` therefore gives each arm two predicted ratios to the reference
arm (GRPO): `ratio_sgd` = E[u_arm] / E[u_ref] (the closed form as it stands, lr x gradient) and
`ratio_adam` = (E[u_arm] / g_arm) / (E[u_ref] / g_ref) with g the run's median pre-clip gradient
norm (steps.parquet), beside the measured ratio with a seed interval. `clip_share` says how often
the gradient norm exceeded grad_clip (then clipping, too, rescales the step).

Intervals: Student-t over seeds at 90 % (seed_stats.t_interval, none below 3 seeds); a ratio's
interval comes from a bootstrap over seeds of both arms' means (percentile, n_boot resamples).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from grpo_dial.analysis.channel import within_group_auc
from grpo_dial.analysis.seed_stats import t_interval
from grpo_dial.analysis.summary_format import over_seeds, signed
from grpo_dial.core.dial import Dial
from grpo_dial.core.length_drift import tail_drift

ESTIMATE, COMPUTE = "~", "="
STEP_COLUMNS = (
    "step n accuracy awareness pi_wrong pi_correct auc_tail core tail tail_estimate tail_compute "
    "tail_wrong tail_correct theta_estimate theta_compute truncation n_estimate n_compute"
).split()
RUN_COLUMNS = (
    "dial seed d_wrong d_correct contrast d_tail_wrong_resp d_tail_correct_resp pred_wrong "
    "pred_correct grad_norm clip_share awareness accuracy auc_tail_first auc_tail_last"
).split()


def _mean(x: np.ndarray) -> float:
    return float(x.mean()) if len(x) else float("nan")


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
                "truncation": float(d["truncated"].to_numpy(dtype=bool).mean()),
                "n_estimate": int(est.sum()),
                "n_compute": int((mode == COMPUTE).sum()),
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
    at each step's measured state (module docstring). A learnable lambda starts at 0 = the token
    mean, so lambda-GRPO is predicted as the token mean (its later lambda is in steps.parquet)."""
    norm = {"sequence": "sequence", "constant": "constant"}.get(dial.length_norm, "token")
    a = np.clip(steps["awareness"].to_numpy(dtype=float), 0.0, 1.0)  # the model needs a >= 0
    p = np.clip(steps["accuracy"].to_numpy(dtype=float), 0.0, 1.0)
    drift = tail_drift(
        p,
        _q(steps["tail_estimate"].to_numpy()),
        _q(steps["tail_compute"].to_numpy()),
        np.maximum(steps["core"].to_numpy(dtype=float), 1.0),
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
    return np.asarray(drift.wrong), np.asarray(drift.correct)


def _window(steps: pd.DataFrame, fraction: float) -> tuple[pd.DataFrame, pd.DataFrame]:
    n = max(1, int(round(len(steps) * fraction)))
    s = steps.sort_values("step")
    return s.head(n), s.tail(n)


def window_theta(window: pd.DataFrame, mode: str) -> float:
    """theta = log E[T | mode] over a window of steps: the tail pooled over the window's responses
    of that mode, plus half a token over their count (so a tail that collapsed to 0 everywhere
    gives a finite floor, log(0.5 / n), instead of -inf)."""
    n = window[f"n_{mode}"].to_numpy(dtype=float)  # (S,)
    t = window[f"tail_{mode}"].to_numpy(dtype=float)
    ok = n > 0
    total = float(n[ok].sum())
    if total == 0:
        return float("nan")
    return float(np.log(((t[ok] * n[ok]).sum() + 0.5) / total))


def run_drift(
    steps: pd.DataFrame,
    train_steps: pd.DataFrame,
    dial: Dial,
    group_size: int,
    groups: int,
    lr: float,
    grad_clip: float | None,
    fraction: float = 0.2,
) -> dict:
    """One run's measured drifts (first vs last window of steps) and the closed form's SGD
    prediction lr x sum over steps of E[u] at the first window's state (the base policy's)."""
    first, last = _window(steps, fraction)
    f, la = first.mean(numeric_only=True), last.mean(numeric_only=True)
    base = first.mean(numeric_only=True).to_frame().T
    uw, uc = predicted_step(base, dial, group_size, groups)
    n_steps = len(steps)
    g = train_steps["grad_norm"].to_numpy(dtype=float) if len(train_steps) else np.array([np.nan])
    g = g[np.isfinite(g)]
    d_wrong = window_theta(last, "estimate") - window_theta(first, "estimate")
    d_correct = window_theta(last, "compute") - window_theta(first, "compute")
    return {
        "d_wrong": d_wrong,
        "d_correct": d_correct,
        "contrast": d_wrong - d_correct,
        "d_tail_wrong_resp": float(la["tail_wrong"] - f["tail_wrong"]),
        "d_tail_correct_resp": float(la["tail_correct"] - f["tail_correct"]),
        "pred_wrong": float(lr * n_steps * uw[0]),
        "pred_correct": float(lr * n_steps * uc[0]),
        "u_wrong": float(uw[0]),
        "u_correct": float(uc[0]),
        "grad_norm": float(np.median(g)) if len(g) else float("nan"),
        "clip_share": float((g > grad_clip).mean()) if grad_clip and len(g) else 0.0,
        "awareness": float(steps["awareness"].mean()),
        "accuracy": float(steps["accuracy"].mean()),
        "auc_tail_first": float(f["auc_tail"]),
        "auc_tail_last": float(la["auc_tail"]),
    }


def _boot_ratio(x: np.ndarray, y: np.ndarray, n_boot: int, seed: int, level: float) -> tuple:
    """mean(x) / mean(y) and a percentile interval resampling the seeds of both arms."""
    x, y = x[np.isfinite(x)], y[np.isfinite(y)]
    if len(x) < 2 or len(y) < 2 or y.mean() == 0:
        return float("nan"), float("nan"), float("nan")
    rng = np.random.default_rng(seed)
    bx = x[rng.integers(0, len(x), (n_boot, len(x)))].mean(1)
    by = y[rng.integers(0, len(y), (n_boot, len(y)))].mean(1)
    with np.errstate(divide="ignore", invalid="ignore"):
        r = bx / by
    lo, hi = np.nanquantile(r, [(1 - level) / 2, (1 + level) / 2])
    return float(x.mean() / y.mean()), float(lo), float(hi)


DRIFT_COLUMNS = (
    "dial n_seeds quantity mean lo hi min max ratio ratio_lo ratio_hi ratio_sgd ratio_adam "
    "pred_sgd grad_norm clip_share"
).split()
QUANTITIES = ("d_wrong", "d_correct", "contrast", "d_tail_wrong_resp", "d_tail_correct_resp")


def drift_table(
    runs: pd.DataFrame, reference: str = "grpo", level: float = 0.9, n_boot: int = 2000
) -> pd.DataFrame:
    """Per dial and quantity: the seed mean with its t interval, the measured ratio to the
    reference dial (bootstrap interval; both at `level`), and the closed form's SGD and
    Adam-normalized ratios (module docstring; for d_correct from the correct-path prediction,
    else the wrong path)."""
    if reference not in set(runs["dial"]):
        raise ValueError(
            f"reference dial {reference!r} has no runs; dials: {sorted(set(runs['dial']))}"
        )
    ref = runs[runs["dial"] == reference]
    rows = []
    for dial, d in runs.groupby("dial", sort=False):
        for q in QUANTITIES:
            m, lo, hi, _, low, high = t_interval(d[q].to_numpy(), level)
            r, rlo, rhi = _boot_ratio(d[q].to_numpy(), ref[q].to_numpy(), n_boot, 0, level)
            path = "u_correct" if q == "d_correct" else "u_wrong"
            u_arm, u_ref = float(d[path].mean()), float(ref[path].mean())
            g_arm, g_ref = float(d["grad_norm"].median()), float(ref["grad_norm"].median())
            sgd = u_arm / u_ref if u_ref else float("nan")
            rows.append(
                {
                    "dial": dial,
                    "n_seeds": len(d),
                    "quantity": q,
                    "mean": m,
                    "lo": lo,
                    "hi": hi,
                    "min": low,
                    "max": high,
                    "ratio": r,
                    "ratio_lo": rlo,
                    "ratio_hi": rhi,
                    "ratio_sgd": sgd,
                    "ratio_adam": sgd * g_ref / g_arm if g_arm else float("nan"),
                    "pred_sgd": float(
                        d["pred_correct" if q == "d_correct" else "pred_wrong"].mean()
                    ),
                    "grad_norm": g_arm,
                    "clip_share": float(d["clip_share"].mean()),
                }  # fmt: skip
            )
    return pd.DataFrame(rows, columns=DRIFT_COLUMNS)


DECOMPOSITION_TERMS = ("total", "mix", "within_correct", "within_incorrect")


def run_decomposition(responses: pd.DataFrame, fraction: float = 0.2) -> dict:
    """The length change of one run split into mix / within correct / within incorrect
    (analysis/decompose.decompose, characters, first vs last window of steps)."""
    from grpo_dial.analysis.decompose import decompose

    steps = np.sort(responses["step"].unique())
    n = max(1, int(round(len(steps) * fraction)))
    terms = decompose(responses, steps[:n], steps[-n:])
    return {q: float(terms[q]) for q in DECOMPOSITION_TERMS}


def decomposition_table(per_run: pd.DataFrame, level: float = 0.9) -> pd.DataFrame:
    """Per dial and term: seed mean with its Student-t interval (columns dial, term, mean, lo,
    hi, n_seeds)."""
    rows = []
    for dial, d in per_run.groupby("dial", sort=False):
        for q in DECOMPOSITION_TERMS:
            m, lo, hi = t_interval(d[q].to_numpy(), level)[:3]
            rows.append({"dial": dial, "term": q, "mean": m, "lo": lo, "hi": hi, "n_seeds": len(d)})
    return pd.DataFrame(rows, columns=["dial", "term", "mean", "lo", "hi", "n_seeds"])


def summary_lines(drift: pd.DataFrame, bridge: pd.DataFrame | None = None) -> list[str]:
    """Markdown lines for summary.md (analysis/summary_text.py may call this): each dial's drift
    of the mode contrast with its 90 % interval and ratio to GRPO, measured and closed form; the
    real-model bridge's within-group AUC and push when given."""
    con = drift[drift["quantity"] == "contrast"]
    wrong = drift[drift["quantity"] == "d_wrong"].set_index("dial")
    parts = []
    for _, r in con.iterrows():
        w = wrong.loc[r["dial"]] if r["dial"] in wrong.index else None
        ratio = "" if w is None else f", ratio {w['ratio']:.2f} (closed form {w['ratio_sgd']:.2f})"
        cell = over_seeds(
            r["mean"],
            r["lo"],
            r["hi"],
            r.get("n_seeds"),
            r.get("min"),
            r.get("max"),
            signed,
            digits=3,
        )
        parts.append(f"{r['dial']} {cell}{ratio}")
    lines = ["- Aware tail, drift of log T~ - log T= (90 % over seeds): " + "; ".join(parts) + "."]
    if bridge is not None and len(bridge):
        b = bridge.set_index("quantity")
        lines.append(
            f"- Real model (math_cot_100): within-group AUC of length for being wrong "
            f"{b.loc['auc', 'value']:.2f} [{b.loc['auc', 'lo']:.2f}, {b.loc['auc', 'hi']:.2f}]; "
            f"GRPO's 1/|o| pushes wrong answers by {b.loc['pressure_wrong', 'value']:+.0f} "
            f"[{b.loc['pressure_wrong', 'lo']:+.0f}, {b.loc['pressure_wrong', 'hi']:+.0f}] "
            "characters per unit advantage."
        )
    return lines

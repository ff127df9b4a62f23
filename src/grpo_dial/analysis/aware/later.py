"""The wrong mode's drift read at the runs' later states (rule aware_later_probe: an SGD cell's
run replayed to step k, backends/own_replay.py), against the closed form at the same states.

Per state (level, arm, seed, step k: the run after k updates; k = 0 is the base) and mode m
(wrong: estimate "~", correct: compute "="):

    probe       the mean over B batches of -J_m . g_b, the expected one-step move of mode m's
                mean continue logit per unit lr through the transformer at the state (probe_se
                = sd / sqrt(B)), J_m of the state's own sample;
    probe_step  the mean over the same batches of (L_m(w - lr g_b) - L_m(w)) / lr, the move of
                that logit L_m (on the state's own sample) by SGD's whole step at the runs' lr:
                the first order plus the curvature along each batch's gradient, whose mean
                (1/2) lr E[g' H_m g] a first-order reading leaves out;
    predicted   the closed form through the kernel of those J at the state's own tails and core
                and the level's p and a (dose.sgd_prediction: (K u)_m per step and unit lr);
    tail        the state's mean tail of mode m in tokens, on its own sample (the base sample's
                recipe and seed, so the states share random numbers);
    logit       mode m's mean continue logit at the state on its own sample; logit_base on the
                base sample's responses (the positions J at k = 0 differentiates);
    tail_last   the run's tail in its last window; run_after = tail_last - tail, the move the
                run made after the state.

`later_drift`: the drift in tokens over the run's n updates (those behind its last window,
runs.window_updates) that the states predict, state k_j standing for updates k_j .. k_{j+1}
(the last up to n), each update moving the logit by lr x probe_j and the tail by tail_j times
that (dT = T dtheta, the geometric slope at the state):

    later_probe = lr sum_j (k_{j+1} - k_j) probe_j tail_j,

`later_step` the same with probe_step_j, `later_closed_form` with predicted_j; each the mean over
the probed seeds.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd

from grpo_dial.analysis.aware.runs import STEP_COLUMNS, window_tail

MODES = {"wrong": "estimate", "correct": "compute"}  # mode -> the step table's tail key
LATER_COLUMNS = (
    "level a dial seed step mode lr updates n_batches probe probe_se probe_step predicted u tail "
    "logit "
    "logit_base k_ee k_ec k_cc k_diff tail_last run_after"
).split()
DRIFT_COLUMNS = ["level", "dial", "mode", "n_seeds", "later_probe", "later_step",
                 "later_closed_form"]  # fmt: skip


def run_end(cell: pd.DataFrame, fraction: float) -> tuple[float, dict[str, float]]:
    """(n, {mode: tail}) of one run's step table: the mean count of updates behind its last
    window of `fraction` of the steps (runs.window_updates) and each mode's tail there."""
    from grpo_dial.analysis.aware.runs import window_updates

    steps = cell.sort_values("step")
    last = steps.tail(max(1, int(round(len(steps) * fraction))))
    return window_updates(steps, fraction), {m: window_tail(last, k) for m, k in MODES.items()}


def check_replay(replayed: pd.DataFrame, cell: pd.DataFrame, where: str) -> None:
    """Raise in one line unless the replayed steps' table equals the stored cell's rows of the
    same steps (STEP_COLUMNS and grad_norm, to 1e-9 relative): the state is the run's."""
    cols = [*STEP_COLUMNS, "grad_norm"]
    stored = cell.set_index("step").reindex(replayed["step"])
    for step, (_, mine), (_, theirs) in zip(replayed["step"], replayed[cols].iterrows(),
                                            stored.reset_index()[cols].iterrows(), strict=True):
        a, b = mine.to_numpy(dtype=float), theirs.to_numpy(dtype=float)
        bad = ~np.isclose(a, b, rtol=1e-9, atol=0.0, equal_nan=True)
        if bad.any():
            i = int(np.argmax(bad))
            raise ValueError(
                f"the replayed run {where} differs from its stored cell at step {step} "
                f"({cols[i]} {a[i]:.6g}, stored {b[i]:.6g}): not the code or config that "
                "trained the cell; rerun rule aware_sweep_cell"
            )


def state_rows(keys: Mapping, batches: pd.DataFrame, predicted: Mapping, state: pd.Series,
               kernel: Mapping, logits: Mapping, logits_base: Mapping,
               last: Mapping) -> list[dict]:  # fmt: skip
    """LATER_COLUMNS' two rows (one per mode) of one state (module docstring). keys: level, a,
    dial, seed, step, lr, updates; batches: probe_state's rows; predicted: sgd_prediction at
    the state; state: the state sample's step-table row; kernel: kernel_entries of its J;
    logits, logits_base, last: mode -> the state's logit, its logit on the base sample, the
    run's last-window tail."""
    rows = []
    for m, key in MODES.items():
        x = batches[m].to_numpy(dtype=float)
        x = x[np.isfinite(x)]
        se = float(x.std(ddof=1) / np.sqrt(x.size)) if x.size > 1 else np.nan
        tail = float(state[f"tail_{key}"])
        row = (
            {**{k: keys[k] for k in ("level", "a", "dial", "seed", "step", "lr", "updates")},
             "mode": m, "n_batches": int(x.size),
             "probe": float(x.mean()) if x.size else np.nan, "probe_se": se,
             "probe_step": (float(np.nanmean(batches[f"{m}_step"])) if f"{m}_step" in batches
                            else np.nan),
             "predicted": float(predicted[f"step_{m}"]), "u": float(predicted[f"u_{m}"]),
             "tail": tail, "logit": float(logits[m]), "logit_base": float(logits_base[m]),
             **{k: float(kernel[k]) for k in ("k_ee", "k_ec", "k_cc", "k_diff")},
             "tail_last": float(last[m]), "run_after": float(last[m]) - tail}
        )  # fmt: skip
        rows.append({c: row[c] for c in LATER_COLUMNS})
    return rows


def later_drift(later: pd.DataFrame) -> pd.DataFrame:
    """DRIFT_COLUMNS per (level, dial, mode): later_probe and later_closed_form (module
    docstring), the mean over the seeds probed."""
    if missing := sorted(set(LATER_COLUMNS) - set(later.columns)):
        raise ValueError(f"the later-state table lacks column(s) {missing}")
    per_seed = []
    for (lev, d, m, seed), g in later.groupby(["level", "dial", "mode", "seed"], sort=False):
        g = g.sort_values("step")
        k = g["step"].to_numpy(dtype=float)
        n = float(g["updates"].iloc[0])
        if not k[-1] < n:
            raise ValueError(f"a later state at step {k[-1]:g} is not before the {n:g} updates "
                             f"behind the run's last window ({lev}, {d}, seed {seed})")  # fmt: skip
        span = np.diff(np.append(k, n))  # updates each state stands for
        lr, tail = float(g["lr"].iloc[0]), g["tail"].to_numpy(dtype=float)
        per_seed.append(
            {"level": lev, "dial": d, "mode": m, "seed": seed,
             **{name: lr * float(np.sum(span * g[col].to_numpy(dtype=float) * tail))
                for name, col in (("later_probe", "probe"), ("later_step", "probe_step"),
                                  ("later_closed_form", "predicted"))}}
        )  # fmt: skip
    if not per_seed:
        return pd.DataFrame(columns=DRIFT_COLUMNS)
    out = pd.DataFrame(per_seed).groupby(["level", "dial", "mode"], sort=False)
    return out.agg(n_seeds=("seed", "size"), later_probe=("later_probe", "mean"),
                   later_step=("later_step", "mean"),
                   later_closed_form=("later_closed_form", "mean")).reset_index()[DRIFT_COLUMNS]


def logit_moves(later: pd.DataFrame) -> pd.DataFrame:
    """`later` with logit_moved (the logit on the base sample's positions less its value at
    step 0, per run) and probe_moved (lr sum over the earlier states of span x probe: the move
    the probes predict up to the state, the first-order reading of logit_moved)."""
    out = []
    for _, g in later.groupby(["level", "dial", "mode", "seed"], sort=False):
        g = g.sort_values("step")
        k = g["step"].to_numpy(dtype=float)
        start = g["logit_base"].to_numpy(dtype=float)[k == 0]
        probe = g["probe"].to_numpy(dtype=float)
        moved = np.cumsum(np.diff(k, prepend=k[0]) * np.append(0.0, probe[:-1]))
        out.append(g.assign(logit_moved=g["logit_base"] - (start[0] if start.size else np.nan),
                            probe_moved=float(g["lr"].iloc[0]) * moved))  # fmt: skip
    return pd.concat(out).sort_index()


def later_markdown(later: pd.DataFrame) -> str:
    """Per level, arm and mode at each state (means over seeds): the probe's and the closed
    form's move per update (x 1e3, per unit lr), the state's tail, and the logit moved on the
    base sample's positions beside the move the earlier states' probes predict for it
    (`logit_moves`)."""
    lines = [
        "## The later states (aware_sweep/later_probe.csv)", "",
        "Each run replayed to step k (k = 0: the base), means over the seeds: the expected move "
        "of the mode's continue logit per update and unit lr (x 1e3) through the transformer "
        "to first order (probe) and by SGD's whole step (curvature included), and through the "
        "kernel of the state's own sample (closed form); the state's "
        "mean tail (tokens); the logit moved since the base on the base sample's positions, "
        "beside the move the earlier states' probes predict (lr x updates x probe).", "",
        "| a | arm | mode | k | seeds | probe | whole step | closed form | tail | logit moved | "
        "predicted |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]  # fmt: skip
    keys = ["level", "a", "dial", "mode", "step"]
    mean = logit_moves(later).groupby(keys, sort=False).agg(
        seeds=("seed", "nunique"), probe=("probe", "mean"), whole=("probe_step", "mean"),
        predicted=("predicted", "mean"), tail=("tail", "mean"), logit_moved=("logit_moved", "mean"),
        probe_moved=("probe_moved", "mean"),
    ).reset_index()  # fmt: skip
    order = mean.sort_values(["a", "dial", "mode", "step"], ascending=[True, True, False, True])
    for _, r in order.iterrows():
        lines.append(
            f"| {r['a']:.1f} | {r['dial']} | {r['mode']} | {int(r['step'])} | {int(r['seeds'])} "
            f"| {1e3 * r['probe']:+.3f} | {1e3 * r['whole']:+.3f} | {1e3 * r['predicted']:+.3f} "
            f"| {r['tail']:.2f} | "
            f"{r['logit_moved']:+.3f} | {r['probe_moved']:+.3f} |"
        )
    return "\n".join(lines) + "\n"


__all__ = [
    "DRIFT_COLUMNS", "LATER_COLUMNS", "MODES", "check_replay", "later_drift", "later_markdown",
    "logit_moves", "run_end", "state_rows",
]  # fmt: skip

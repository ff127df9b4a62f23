"""Why the wrong mode stalls: the SGD closed form of each mode's drift read three ways beside the
runs (analysis/aware/dose.py predicts the first).

For an arm with the 1/|o| normalizer (`length_norm: sequence`) at a level, per mode m (wrong:
estimate `~`, right: compute `=`) over the n updates behind the last window at learning rate lr,
with the kernel K of the weights SGD moves and the closed form's per-group updates u
(dose.sgd_prediction):

    geometric      dT_m = slope_m lr n (K u)_m   at the base tails, geometric (slope = T_m),
    measured tail  the same with h_m and slope_m of the base sample's own tail distribution per
                   mode (core/tail_shape.tail_push; u_m scales with h_m under `sequence`),
    end state      geometric at the last window's measured tails (base + the run's drift): the
                   push and slope where the runs end, the kernel kept at the base,
    drag           the part of the geometric wrong-mode drift that comes from the right mode's
                   push through K_ec (slope_w lr n K_ec u_c; for the right mode K_ec u_w);
    later probe    the drift the one-step probe at the runs' later states predicts over the n
                   updates, later step the same with SGD's whole step (curvature included), and
                   later closed form the closed form's through each state's own kernel and
                   tails (analysis/aware/later.later_drift; NaN where not probed).

`measured` is the arm's drift minus the tail-frozen control's, paired by seed, with its 90 %
interval (analysis/aware/paired.paired_table). A reading accounts for the stall where it brings
the wrong mode's prediction down to the measured drift while keeping the right mode's.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd

from grpo_dial.analysis.aware.dose import kernel_of, level_awareness, sgd_prediction
from grpo_dial.analysis.aware.grid import FROZEN
from grpo_dial.core.tail_shape import empirical_pmf, geometric_pmf, tail_push

MODES = {"wrong": ("~", "estimate", "d_wrong_tokens"), "correct": ("=", "compute",
                                                                 "d_correct_tokens")}  # fmt: skip
LONGEST = 4000  # the geometric tail's cut (its mass there is below 1e-100 at a mean of 3)

MODE_COLUMNS = "mode n mean p0 p0_geometric var var_geometric h h_geometric slope slope_geometric"
SHAPE_COLUMNS = (
    "level a dial mode measured lo hi geometric measured_tail end_state drag later_probe "
    "later_step later_closed_form"
).split()


def mode_tails(responses: pd.DataFrame, core: float) -> pd.DataFrame:
    """Per mode, the base sample's tail distribution beside the geometric one of the same mean:
    P(T = 0), the variance, h and slope (core/tail_shape.tail_push) after `core` tokens.
    `responses`: aware/base_responses.parquet (`prefix` starts with the mode, `redundant` is
    the tail in tokens)."""
    rows = []
    for mode, (marker, _, _) in MODES.items():
        t = responses.loc[responses["prefix"].str[0] == marker, "redundant"].to_numpy()
        if not t.size:
            raise ValueError(f"the base sample has no response in mode {marker!r}")
        m = float(t.mean())
        h, slope = tail_push(empirical_pmf(t), core)
        hg, sg = tail_push(geometric_pmf(m, LONGEST), core)
        rows.append({"mode": mode, "n": int(t.size), "mean": m, "p0": float((t == 0).mean()),
                     "p0_geometric": 1 / (1 + m), "var": float(t.var()),
                     "var_geometric": m * (1 + m), "h": h, "h_geometric": hg, "slope": slope,
                     "slope_geometric": sg})  # fmt: skip
    return pd.DataFrame(rows, columns=MODE_COLUMNS.split())


def _drift(step: Mapping, k: pd.Series, scale: float, slope: Mapping) -> dict[str, float]:
    """Tokens per mode of per-step updates u (per unit lr), scaled by lr n, through kernel k."""
    uw, uc = step["u_wrong"], step["u_correct"]
    return {"wrong": slope["wrong"] * scale * (k["k_ee"] * uw + k["k_ec"] * uc),
            "correct": slope["correct"] * scale * (k["k_ec"] * uw + k["k_cc"] * uc)}  # fmt: skip


def shape_table(runs: pd.DataFrame, paired: pd.DataFrame, tails: pd.DataFrame,
                base: pd.DataFrame, kernel: pd.DataFrame, arms: Mapping, train: Mapping,
                options: Mapping, sgd_lr: float, sgd_weights: str = "all",
                later: pd.DataFrame | None = None) -> pd.DataFrame:  # fmt: skip
    """SHAPE_COLUMNS per level, 1/|o| arm and mode of the SGD runs (module docstring); later:
    aware_sweep/later_probe.csv (None: the later-state columns NaN)."""
    from grpo_dial.analysis.aware.later import later_drift
    from grpo_dial.core.dial import arm_from_fields

    k = kernel_of(kernel, sgd_weights).iloc[0]
    t = tails.set_index("mode")
    ratio = {m: t.loc[m, "h"] / t.loc[m, "h_geometric"] for m in MODES}
    geo = {m: float(t.loc[m, "mean"]) for m in MODES}
    own = {m: float(t.loc[m, "slope"]) for m in MODES}
    net = paired[paired["second"] == FROZEN].set_index(["optimizer", "level", "first", "quantity"])
    states = (later_drift(later) if later is not None else
              pd.DataFrame(columns=["level", "dial", "mode"])).set_index(["level", "dial", "mode"])
    rows = []
    sgd = runs[(runs["optimizer"] == "sgd") & (runs["dial"] != FROZEN)]
    for (lev, d), g in sgd.groupby(["level", "dial"], sort=False):
        dial = arm_from_fields(arms[d]).dial
        if dial.length_norm != "sequence":
            continue
        step = sgd_prediction(dial, base, kernel_of(kernel, sgd_weights), lev, options, train)
        per_step = step["step_wrong"] * sgd_lr  # pred_theta_wrong = per_step x n updates
        n = float(g["pred_theta_wrong"].mean() / per_step) if per_step else 0.0  # 0 at a = 0
        scale = sgd_lr * n
        shaped = {"u_wrong": step["u_wrong"] * ratio["wrong"],
                  "u_correct": step["u_correct"] * ratio["correct"]}  # fmt: skip
        end_tails = {m: max(geo[m] + float(g[MODES[m][2]].mean()), 1e-3) for m in MODES}
        a = level_awareness(lev, float(options.get("estimate_rate", 0.5)))[1]
        end = base.assign(tail_estimate=end_tails["wrong"], tail_compute=end_tails["correct"])
        end_step = sgd_prediction(dial, end, kernel_of(kernel, sgd_weights), lev, options, train)
        readings = {
            "geometric": _drift(step, k, scale, geo),
            "measured_tail": _drift(shaped, k, scale, own),
            "end_state": _drift(end_step, k, scale, end_tails),
        }
        drag = {"wrong": geo["wrong"] * scale * k["k_ec"] * step["u_correct"],
                "correct": geo["correct"] * scale * k["k_ec"] * step["u_wrong"]}  # fmt: skip
        for m, (_, _, q) in MODES.items():
            key = ("sgd", lev, d, q)
            r = net.loc[key] if key in net.index else None
            st = states.loc[(lev, d, m)] if (lev, d, m) in states.index else None
            rows.append({"level": lev, "a": a, "dial": d, "mode": m,
                         "measured": np.nan if r is None else float(r["mean"]),
                         "lo": np.nan if r is None else float(r["lo"]),
                         "hi": np.nan if r is None else float(r["hi"]),
                         **{name: float(v[m]) for name, v in readings.items()},
                         "drag": float(drag[m]),
                         **{c: np.nan if st is None else float(st[c])
                            for c in ("later_probe", "later_step", "later_closed_form")}})
    return pd.DataFrame(rows, columns=SHAPE_COLUMNS)


def _cell(x: float) -> str:
    return f"{x:+.2f}" if np.isfinite(x) else "n/a"


def shape_markdown(tails: pd.DataFrame, shape: pd.DataFrame) -> str:
    """The base sample's tail per mode against the geometric, then each mode's measured drift
    beside the three readings and the K_ec drag (tokens)."""
    lines = [
        "## Why the wrong mode stalls (aware_sweep/tail_shape.csv)", "",
        "The base sample's tail per mode, in brackets the geometric tail of its mean; "
        "h = E[s / |o|] and slope = dE[T]/dtheta under a shift of every continue logit.", "",
        "| mode | responses | mean | P(T = 0) | variance | h | slope |",
        "|---|---|---|---|---|---|---|",
    ]  # fmt: skip
    for _, r in tails.iterrows():
        lines.append(
            f"| {r['mode']} | {int(r['n'])} | {r['mean']:.2f} | {r['p0']:.3f} "
            f"({r['p0_geometric']:.3f}) | {r['var']:.1f} ({r['var_geometric']:.1f}) | "
            f"{r['h']:.4f} ({r['h_geometric']:.4f}) | {r['slope']:.2f} "
            f"({r['slope_geometric']:.2f}) |"
        )
    lines += [
        "", "Each 1/|o| arm's drift under SGD, tokens: measured net of the control (paired, 90 %) "
        "beside the closed form at the base tails (geometric), with the base sample's own tail "
        "shape, at the last window's tails, the part the other mode's push adds through "
        "K_ec, and at the runs' later states the one-step probe, SGD's whole step and the "
        "closed form (n/a: not probed).", "",
        "| a | arm | mode | measured | geometric | measured tail | end state | K_ec drag | "
        "later probe | later step | later closed form |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]  # fmt: skip
    for _, r in shape.iterrows():
        cell = (f"{r['measured']:+.2f} [{r['lo']:+.2f}, {r['hi']:+.2f}]"
                if np.isfinite(r["lo"]) else f"{r['measured']:+.2f}")  # fmt: skip
        lines.append(
            f"| {r['a']:.1f} | {r['dial']} | {r['mode']} | {cell} | {r['geometric']:+.2f} | "
            f"{r['measured_tail']:+.2f} | {r['end_state']:+.2f} | {r['drag']:+.2f} | "
            f"{_cell(r['later_probe'])} | {_cell(r['later_step'])} | "
            f"{_cell(r['later_closed_form'])} |"
        )
    return "\n".join(lines) + "\n"


__all__ = ["MODES", "SHAPE_COLUMNS", "mode_tails", "shape_markdown", "shape_table"]

"""Sections of the run summary that need no trained model: closed forms, seeded simulations and
the public tables, identical on any machine. Each takes the tables keyed by their path under the
results directory and returns markdown lines, or [] when its tables are absent.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd

from grpo_dial.analysis.markdown import (
    arrow,
    count,
    interval,
    md_table,
    missing,
    num,
    one,
    pct,
    pick,
    sci,
    seed_cell,
    signed,
    source,
)
from grpo_dial.core.arm_names import arm_name

Tables = Mapping[str, pd.DataFrame]


def group_size(tables: Tables) -> list[str]:
    """Exact smallest G keeping a fidelity, p by fidelity, closed form rounded to nearest."""
    path = "theory/group_size_table.csv"
    t = one(tables, path)
    if t is None:
        return []
    fids = sorted(t["fidelity"].unique())
    rows = []
    for p, by_p in t.groupby("p", sort=False):
        cell = by_p.set_index("fidelity")
        rows.append([f"{p:g}", *(
            f"{int(cell.loc[f, 'g_exact'])} ({int(cell.loc[f, 'g_closed_form_nearest'])})"
            if f in cell.index else "n/a" for f in fids
        )])  # fmt: skip
    return [
        "## Group size for fidelity", "",
        "Smallest G that keeps the given share of a prompt's large-group signal, exact (the closed "
        "form rounded to nearest in brackets).", "",
        *md_table(["p", *(f"{f:.0%}" for f in fids)], rows), source(path), "",
    ]  # fmt: skip


def identity(tables: Tables) -> list[str]:
    """Largest residual of the group-std identity through the advantage code, per recipe."""
    path = "theory/identity_residuals.csv"
    t = one(tables, path)
    if t is None:
        return []
    by = t.groupby("recipe", sort=False)[["max_abs_residual", "relative_residual"]].max()
    rows = [[r, sci(v["max_abs_residual"]), sci(v["relative_residual"])] for r, v in by.iterrows()]
    dims = ", ".join(str(d) for d in sorted(t["dim"].unique()))
    return [
        "## Identity check", "",
        f"Largest residual over G in {{{', '.join(str(g) for g in sorted(t['G'].unique()))}}}, "
        f"every k and dimensions {dims}: {sci(t['max_abs_residual'].max(), 0)}.", "",
        *md_table(["recipe", "largest absolute residual", "largest relative residual"], rows),
        source(path), "",
    ]  # fmt: skip


DIFFICULTY_COLUMNS = (
    ("never solved", "never_solved_fraction"),
    ("always solved", "always_solved_fraction"),
    ("extreme mass, GRPO", "extreme_share_grpo"),
    ("extreme mass, Dr. GRPO", "extreme_share_dr_grpo"),
    ("medium mass, GRPO", "medium_share_grpo"),
    ("medium mass, Dr. GRPO", "medium_share_dr_grpo"),
    ("silent at G = 8", "silent_fraction_G8"),
)


def difficulty(tables: Tables) -> list[str]:
    """Pass-rate tables side by side: unanimous prompts, gradient mass on extreme (0 < p < 0.1 or
    0.9 < p < 1) and medium prompts, silent groups at G = 8."""
    found = pick(tables, r"difficulty/(?P<name>[^/]+)/summary\.csv")
    if not found:
        return []
    rows = []
    for name, _, t in found:
        v = t.set_index("metric")["value"]
        between = 1 - v.get("never_solved_fraction", float("nan")) - v.get(
            "always_solved_fraction", float("nan"))  # fmt: skip
        rows.append([name, count(v.get("n_prompts")), pct(between),
                     *(pct(v.get(key)) for _, key in DIFFICULTY_COLUMNS)])  # fmt: skip
    machine = " (`base_policy` is the trained model's own table)" if any(
        name == "base_policy" for name, _, _ in found) else ""  # fmt: skip
    return [
        "## Difficulty of the pass-rate tables", "",
        "Shares of prompts, and of GRPO's / Dr. GRPO's expected gradient mass on extreme "
        f"(0 < p < 0.1 or 0.9 < p < 1) and medium prompts{machine}.", "",
        *md_table(["table", "prompts", "0 < p < 1", *(h for h, _ in DIFFICULTY_COLUMNS)], rows),
        source(*(path for _, path, _ in found)), "",
    ]  # fmt: skip


def simulate(tables: Tables) -> list[str]:
    """The controlled Bernoulli-logit run per pass-rate table, one row per arm."""
    found = pick(tables, r"simulate/(?P<name>[^/]+)/summary\.csv")
    lines = ["## Controlled Bernoulli-logit run", ""] if found else []
    for name, path, t in found:
        rows = [[
            arm_name(r["arm"]), f"{r['lr']:.3g}", num(r["silent_r2"]),
            pct(r["initial_extreme_mass"]), pct(r.get("realized_extreme_mass")),
            num(r["hardest_quartile_final_p"], 4), pct(r.get("mean_silent_fraction")),
            num(r["oversampling_factor"], 2), count(r.get("steps_to_mean_p_0_9")),
        ] for _, r in t.iterrows()]  # fmt: skip
        lines += [
            f"Prompts drawn from `{name}`:", "",
            *md_table(["arm", "lr", "silent R^2", "extreme mass, first step",
                       "extreme mass, whole run", "hardest quartile final p", "silent fraction",
                       "samples (x GRPO)", "steps to mean p 0.9"], rows),
            source(path), "",
        ]  # fmt: skip
    return lines


def length_bias(tables: Tables) -> list[str]:
    """The length-bias simulation: each arm's drift of a wrong answer's tail at the highest
    awareness against the closed form, and the fit over every arm, awareness and step."""
    found = pick(tables, r"length_bias/(?P<name>[^/]+)/summary\.csv")
    lines = ["## Length-bias simulation", ""] if found else []
    for name, path, t in found:
        top = t[t["awareness"] == t["awareness"].max()]
        rows = [[
            arm_name(r["arm"]),
            seed_cell(r, "measured_drift_wrong", sci, digits=2),
            sci(r["predicted_drift_wrong"], 2),
            seed_cell(r, "measured_ratio_to_grpo", num, digits=4),
            num(r["predicted_ratio_to_grpo"], 4),
            arrow(r["tail_wrong_start"], r["tail_wrong_end"], num, digits=1),
            arrow(r["tail_correct_start"], r["tail_correct_end"], num, digits=1),
        ] for _, r in top.iterrows()]  # fmt: skip
        seeds = int(t["n_seeds"].max())
        lines += [
            f"Pass rates of `{name}`, awareness {top['awareness'].iloc[0]:g}, {seeds} seeds "
            "(90% t intervals over seeds; drift per step and group, before the learning rate):", "",
            *md_table(["arm", "wrong-path drift", "closed form", "share of GRPO's",
                       "closed form", "wrong tail", "correct tail"], rows),
        ]  # fmt: skip
        fit_path = f"length_bias/{name}/fit.csv"
        fit = one(tables, fit_path)
        if fit is not None:
            f = fit.set_index("path")
            lines += [
                "Measured against closed-form per-step drift over every arm, awareness and step: "
                + ", ".join(f"{p} path R^2 {num(f.loc[p, 'r2'])}" for p in f.index)
                + f"; a blind tail's drift is at most |z| = {num(f['blind_max_abs_z'].max(), 2)} "
                "from 0.", "",
            ]  # fmt: skip
        lines += [source(path, *([fit_path] if fit is not None else [])), ""]
    return lines


def dapo(tables: Tables) -> list[str]:
    """DAPO's logged all-correct curve against the one-timescale closed form and a generic fit."""
    path = "dapo/fit_summary.csv"
    t = one(tables, path)
    if t is None:
        return []
    names = {"closed_form": "closed form, one timescale", "saturating": "generic saturating"}
    rows = [[names.get(r["model"], r["model"]), count(r["n_params"]),
             interval(r["r2"], r["r2_lo"], r["r2_hi"])] for _, r in t.iterrows()]  # fmt: skip
    return ["## DAPO consistency", "", *md_table(["model", "parameters", "R^2 [90% bootstrap]"],
            rows), source(path), ""]  # fmt: skip


def real_lengths(tables: Tables) -> list[str]:
    """Correct against incorrect response length in logged real responses, by difficulty, and
    pooled (response-weighted means of the rows)."""
    path = "real_lengths/by_correctness.csv"
    t = one(tables, path)
    if t is None:
        return []
    rows = [[r["source"], r["difficulty"], count(r["n_problems"]), num(r["mean_len_correct"], 0),
             num(r["mean_len_incorrect"], 0),
             interval(r["diff"], r["diff_lo"], r["diff_hi"], signed, digits=0)]
            for _, r in t.iterrows()]  # fmt: skip
    pooled = []
    for src, s in t.groupby("source", sort=False):
        mean = {}
        for side in ("correct", "incorrect"):
            n = s[f"n_{side}"].astype(float)
            mean[side] = (n * s[f"mean_len_{side}"].fillna(0)).sum() / n.sum() if n.sum() else None
        if mean["correct"] is not None and mean["incorrect"] is not None:
            pooled.append(f"{src} {signed(mean['incorrect'] - mean['correct'], 0)}")
    return [
        "## Length by correctness in logged real responses", "",
        *md_table(["source", "difficulty", "problems", "correct (chars)", "incorrect (chars)",
                   "incorrect - correct"], rows),
        "Pooled over difficulty (every response), incorrect - correct: " + ", ".join(pooled)
        + " characters.", "", source(path), "",
    ]  # fmt: skip


def group_bias(tables: Tables) -> list[str]:
    """The non-degenerate-group baseline bias and HA-DW's correction, closed form at G = 8 (the
    training group size) or the table's middle G."""
    path = "theory/group_bias.csv"
    t = one(tables, path)
    if t is None:
        return []
    sizes = sorted(t["G"].unique())
    g = 8 if 8 in sizes else sizes[len(sizes) // 2]
    rows = [[f"{r['p']:g}", num(r["nondegenerate"]), num(r["baseline"]), num(r["adv_correct"]),
             num(r["adv_correct_true"]), num(r["hadw_adv_correct"]), num(r["adv_wrong"]),
             num(r["adv_wrong_true"])] for _, r in t[t["G"] == g].iterrows()]  # fmt: skip
    anchor = t["anchor"].iloc[0]
    anchor = "each row's own p" if missing(anchor) else f"C = {num(anchor, 2)}"
    return [
        f"Closed form at G = {g}: the baseline of a group that is not unanimous, and a correct "
        "or wrong answer's advantage under it, with the true p and under HA-DW's anchor "
        f"({anchor}):", "",
        *md_table(["p", "P(not unanimous)", "baseline", "correct, group baseline",
                   "correct, true p", "correct, HA-DW", "wrong, group baseline", "wrong, true p"],
                  rows),
        source(path), "",
    ]  # fmt: skip


def estimator_theory(tables: Tables) -> list[str]:
    """Every engine estimator's gradient mass at a few p (G = 8, or the table's middle G), its
    ratio to Dr. GRPO's over the grid, and the same-operation identity checked numerically."""
    mass_path, id_path = "theory/estimator_mass.csv", "theory/estimator_identity.csv"
    mass, ident = one(tables, mass_path), one(tables, id_path)
    if mass is None:
        return []
    sizes = sorted(mass["G"].unique())
    g = 8 if 8 in sizes else sizes[len(sizes) // 2]
    at = mass[mass["G"] == g]
    grid = np.sort(at["p"].unique())
    cols = [grid[np.abs(grid - q).argmin()] for q in (0.05, 0.1, 0.3, 0.5)]
    same = (ident if ident is not None else pd.DataFrame({"estimator": []})).set_index("estimator")
    rows = []
    for name, e in at.groupby("estimator", sort=False):
        m, ratio = e.set_index("p")["mass"], e["ratio_to_dr_grpo"]
        check = "" if name not in same.index else (
            f"yes ({sci(same.loc[name, 'max_relative_residual'], 0)})"
            if same.loc[name, "same_operation"] else
            f"no ({num(same.loc[name, 'max_relative_residual'], 2)})")  # fmt: skip
        rows.append([arm_name(name), *(num(m.loc[c], 4) for c in cols),
                     f"{num(ratio.min(), 3)}-{num(ratio.max(), 3)}", check])  # fmt: skip
    lines = [
        f"Expected gradient mass per prompt m(p) at G = {g} (binary rewards; batch constants at a "
        "uniform batch), its ratio to Dr. GRPO's over the p grid (one number: Dr. GRPO's "
        "difficulty weighting at another step size), and whether the advantage is Dr. GRPO's "
        "times one constant per batch on random batches (largest relative residual):", "",
        *md_table(["estimator", *(f"p = {c:.2g}" for c in cols), "ratio to Dr. GRPO",
                   "Dr. GRPO x constant"], rows),
    ]  # fmt: skip
    if ident is not None:
        extra = ident[~ident["estimator"].isin(at["estimator"])]
        notes = [f"{r['estimator']}: {'yes' if r['same_operation'] else 'no'} (residual "
                 f"{sci(r['max_relative_residual'], 0)}, constant error "
                 f"{sci(r['max_constant_error'], 0)}); " for _, r in extra.iterrows()]  # fmt: skip
        wrong = ident[ident["same_operation"] != ident["predicted_same"]]
        verdict = "every identity as predicted." if wrong.empty else (
            "differs from its prediction: " + ", ".join(wrong["estimator"]) + ".")  # fmt: skip
        lines += ["".join(notes) + verdict, ""]
    return [*lines, source(mass_path, *([id_path] if ident is not None else [])), ""]


__all__ = [
    "dapo", "difficulty", "estimator_theory", "group_bias", "group_size", "identity",
    "length_bias", "real_lengths", "simulate",
]  # fmt: skip

"""aware_sweep/summary.md: the dose table and fit (analysis/aware/dose.py) as markdown, and the
one-step probe's table and fit (analysis/aware/probe.py) after them."""

from __future__ import annotations

import numpy as np
import pandas as pd


def _p(x) -> str:
    return "n/a" if pd.isna(x) else f"{x:.2g}"


def _cell(r) -> str:
    """One quantity over seeds: mean [90 %], or the seeds' range below 3 seeds."""
    from grpo_dial.analysis.markdown import over_seeds, signed

    return over_seeds(r["mean"], r["lo"], r["hi"], r["n_seeds"], r["min"], r["max"], signed,
                      digits=2)  # fmt: skip


def _tests(row) -> str:
    """sign p / Wilcoxon p (the Wilcoxon p adjusted over the arm's levels, Benjamini-Hochberg)."""
    return f"{_p(row['sign_p'])} / {_p(row['wilcoxon_p'])} ({_p(row['wilcoxon_bh'])})"


def _net(row) -> str:
    """The mean net of the tail-frozen control with Welch's 90 % interval; n/a for the control."""
    if pd.isna(row["net"]):
        return "n/a"
    if pd.isna(row["net_lo"]):
        return f"{row['net']:+.2f}"
    return f"{row['net']:+.2f} [{row['net_lo']:+.2f}, {row['net_hi']:+.2f}]"


def _first_order(row) -> float:
    """Adam's first-order prediction of the cell (NaN where the table has none)."""
    return float(row.get("adam_first_order", float("nan")))


def _predicted(row, optimizer: str) -> str:
    """The prediction beside a measured cell: the SGD closed form, or Adam's SNR with one Adam
    coordinate's drift and, where drawn, Adam's first-order prediction."""
    if optimizer == "sgd":
        return f"{row['predicted']:+.2f}"
    first = _first_order(row)
    tail = "" if np.isnan(first) else f"; {first:+.2f}"
    return f"{row['snr']:.2f} ({row['adam_tabular']:+.2f}{tail})"


def _signed(x) -> str:
    """A signed number to two decimals, n/a where it is undefined (a ratio to a zero)."""
    return "n/a" if pd.isna(x) else f"{x:+.2f}"


PROBE_SCALE = 1e3  # the probe's moves per unit lr are printed in units of 10^-3


def _probe_cell(r) -> str:
    """One probe quantity x 10^3: mean [90 % over batches]."""
    k = PROBE_SCALE
    return f"{k * r['mean']:+.2f} [{k * r['lo']:+.2f}, {k * r['hi']:+.2f}]"


def probe_markdown(probe: pd.DataFrame, fit: pd.DataFrame) -> str:
    """The one-step probe as markdown (`weights_probe_markdown`), one section per weights
    setting when the tables carry a `weights` column (the J of every weight, then of the weights
    SGD's cells move, projected on the same batches)."""
    if "weights" not in probe:
        return weights_probe_markdown(probe, fit)
    parts = []
    for w, t in probe.groupby("weights", sort=False):
        f = fit[fit["weights"] == w] if "weights" in fit else fit
        text = weights_probe_markdown(t, f)
        parts.append(text.replace("(aware_sweep/probe.csv)",
                                  f"(aware_sweep/probe.csv), SGD on weights `{w}`", 1))  # fmt: skip
    return "\n".join(parts)


def weights_probe_markdown(probe: pd.DataFrame, fit: pd.DataFrame) -> str:
    """The one-step probe as markdown: per level and arm, the modes' contrast per unit lr (x 10^3,
    mean [90 %] over batches) beside the closed form through the kernel, its ratio to the
    reference arm's (+- its SE) beside the predicted ratio and the share of batches the clip
    would cut; then each mode's own move beside its closed form; then the fit of measured on
    predicted."""
    head = [
        "## The one-step probe (aware_sweep/probe.csv)", "",
        "SGD's expected first step at the base policy through the transformer, per unit lr, "
        "x 10^-3 (mean [90 %] over batches), beside the closed form through the kernel.", "",
    ]  # fmt: skip
    contrast = [
        "| a | arm | batches | contrast | predicted | contrast / reference | predicted | "
        "clipped share |",
        "|---|---|---|---|---|---|---|---|",
    ]  # fmt: skip
    modes = ["| a | arm | wrong mode | predicted | right mode | predicted |",
             "|---|---|---|---|---|---|"]  # fmt: skip
    by = probe.set_index(["level", "dial", "quantity"])
    k = PROBE_SCALE
    for (lev, d), _ in probe.groupby(["level", "dial"], sort=False):
        c, w, r = (by.loc[(lev, d, q)] for q in ("contrast", "wrong", "correct"))
        contrast.append(
            f"| {c['a']:.1f} | {d} | {int(c['n_batches'])} | {_probe_cell(c)} | "
            f"{k * c['predicted']:+.2f} | {c['ratio_reference']:+.2f} +- "
            f"{c['ratio_reference_se']:.2f} | {_signed(c['predicted_ratio_reference'])} | "
            f"{100 * c['clip_share']:.0f} % |"
        )
        modes.append(f"| {c['a']:.1f} | {d} | {_probe_cell(w)} | {k * w['predicted']:+.2f} | "
                     f"{_probe_cell(r)} | {k * r['predicted']:+.2f} |")  # fmt: skip
    lines = [*head, *contrast, "", "Each mode's move, the same units.", "", *modes]
    if len(fit):
        lines += ["", "| quantity | slope | R^2 | Spearman (p) | cells |", "|---|---|---|---|---|"]
        for _, f in fit.iterrows():
            rho = f"{f['spearman']:+.2f} ({_p(f['spearman_p'])})"
            lines.append(f"| {f['quantity']} | {f['slope']:.3g} | {f['r2']:.2f} | {rho} | "
                         f"{int(f['n'])} |")  # fmt: skip
    return "\n".join(lines) + "\n"


def rate_notes(rates: pd.Series) -> dict[str, str]:
    """optimizer -> one sentence on what it trained and at which rate (aware_sweep/rates.csv)."""
    moved = ("the rows of the mode markers \"=\" and \"~\" in the embedding alone"
             if rates.get("sgd_weights", "all") == "markers" else "every weight")  # fmt: skip
    return {
        "sgd": f"SGD at lr {rates['lr']:.3g} on {moved}, sized so that the closed form through "
               f"their kernel (K_ee {rates['k_ee']:.3g}, K_ec {rates['k_ec']:.3g}, K_cc "
               f"{rates['k_cc']:.3g}) moves the reference arm's contrast by {rates['target']:g} "
               f"in theta over {int(rates['steps'])} steps at {rates['level']}.",
        "adamw": f"AdamW at lr {rates['lr_adam']:.3g} on every weight (a first step moves the "
                 f"tail logit by at most {rates['adam_step']:g}).",
    }  # fmt: skip


def _power(row, optimizer: str) -> str:
    """The smallest mean the seeds tell from 0 at 80 % power, and their chance to tell the
    prediction (none where it is 0); n/a below three seeds."""
    if pd.isna(row.get("detectable", float("nan"))):
        return "n/a"
    first = optimizer != "sgd" and not np.isnan(_first_order(row))
    expected = (row["predicted"] if optimizer == "sgd"
                else row["adam_first_order"] if first else row["adam_tabular"])  # fmt: skip
    if pd.isna(expected) or expected == 0:
        return f"{row['detectable']:.2f}"
    power = row["power_first_order"] if first else row["power"]
    return f"{row['detectable']:.2f} ({100 * power:.0f} %)"


def _contrast_table(g: pd.DataFrame, by: pd.DataFrame, opt: str, pred: str) -> list[str]:
    """Each level and arm's contrast in tokens: measured, tests, prediction, net, power."""
    lines = [
        "Contrast (wrong-mode minus right-mode drift), tokens; detectable: the smallest mean the "
        "cell's seeds tell from 0 at 80 % power (two-sided, 90 %), in brackets their power "
        "against the prediction.", "",
        f"| a | arm | seeds | contrast | sign / Wilcoxon p (BH) | {pred} | net of the control | "
        "detectable (power) |",
        "|---|---|---|---|---|---|---|---|",
    ]  # fmt: skip
    for (lev, d), _ in g.groupby(["level", "dial"], sort=False):
        c = by.loc[(opt, lev, d, "contrast_tokens")]
        lines.append(
            f"| {c['a']:.1f} | {d} | {int(c['n_seeds'])} | {_cell(c)} | {_tests(c)} | "
            f"{_predicted(c, opt)} | {_net(c)} | {_power(c, opt)} |"
        )
    return lines


def _modes_table(g: pd.DataFrame, by: pd.DataFrame, opt: str, pred: str) -> list[str]:
    """Each level and arm's wrong-mode drift in tokens with prediction and net and the last
    window's largest truncated share; then the right mode's the same way with the common drift
    in log(1 + T)."""
    lines = []
    for mode, q, label in (("wrong mode (estimate, `~`)", "d_wrong_tokens", "truncated (max)"),
                           ("right mode (compute, `=`)", "d_correct_tokens",
                            "common drift, log(1 + T)")):  # fmt: skip
        lines += [f"Drift of the {mode}, tokens.", "",
                  f"| a | arm | drift | {pred} | net of the control | {label} |",
                  "|---|---|---|---|---|---|"]  # fmt: skip
        for (lev, d), _ in g.groupby(["level", "dial"], sort=False):
            m = by.loc[(opt, lev, d, q)]
            last = (f"{100 * m['truncation_last']:.1f} %" if q == "d_wrong_tokens"
                    else _cell(by.loc[(opt, lev, d, "d_common")]))  # fmt: skip
            lines.append(f"| {m['a']:.1f} | {d} | {_cell(m)} | {_predicted(m, opt)} | "
                         f"{_net(m)} | {last} |")  # fmt: skip
        lines.append("")
    return lines[:-1]


def _diff(row) -> str:
    """A seed-paired difference: mean [90 %] (Wilcoxon p)."""
    if pd.isna(row["lo"]):
        return f"{row['mean']:+.2f} (n/a)"
    return f"{row['mean']:+.2f} [{row['lo']:+.2f}, {row['hi']:+.2f}] ({_p(row['wilcoxon_p'])})"


def _paired_table(paired: pd.DataFrame) -> list[str]:
    """Seed-paired differences per level and comparison, each quantity beside its prediction."""
    lines = [
        "Paired by seed (the arms share seeds, hence batches and sampler streams): mean "
        "difference [90 % paired t] (Wilcoxon signed-rank p), tokens, beside the predicted "
        "difference; detectable: the contrast difference the paired seeds tell from 0 at 80 % "
        "power.", "",
        "| a | difference | contrast | predicted | wrong mode | predicted | right mode | "
        "predicted | detectable |",
        "|---|---|---|---|---|---|---|---|---|",
    ]  # fmt: skip
    by = paired.set_index(["level", "first", "second", "quantity"])
    for (lev, first, second), _ in paired.groupby(["level", "first", "second"], sort=False):
        c, w, r = (by.loc[(lev, first, second, q)]
                   for q in ("contrast_tokens", "d_wrong_tokens", "d_correct_tokens"))  # fmt: skip
        lines.append(
            f"| {c['a']:.1f} | {first} - {second} | {_diff(c)} | {c['predicted']:+.2f} | "
            f"{_diff(w)} | {w['predicted']:+.2f} | {_diff(r)} | {r['predicted']:+.2f} | "
            f"{c['detectable']:.2f} |"
        )
    return lines


def _ratio(value: float, lo: float, hi: float) -> str:
    """A ratio with its bootstrap interval; an unbounded interval printed as such."""
    if pd.isna(value):
        return "n/a"
    if not np.isfinite(lo):
        return f"{value:+.2f} [unbounded]"
    return f"{value:+.2f} [{lo:+.2f}, {hi:+.2f}]"


def _ratio_table(ratios: pd.DataFrame) -> list[str]:
    """Each arm's ratio to the reference arm per level and quantity, raw and net of the control."""
    ref = ratios["reference"].iloc[0]
    lines = [
        f"Ratio to {ref}, mean over seeds, raw and net of the control, with 90 % percentile "
        "bootstrap intervals over the shared seeds (unbounded where the denominator's draws "
        "cross 0), beside the predicted ratio.", "",
        "| a | arm | quantity | ratio | net of the control | predicted |",
        "|---|---|---|---|---|---|",
    ]  # fmt: skip
    for _, r in ratios.iterrows():
        lines.append(
            f"| {r['a']:.1f} | {r['dial']} | {r['quantity']} | "
            f"{_ratio(r['ratio'], r['lo'], r['hi'])} | "
            f"{_ratio(r['net_ratio'], r['net_lo'], r['net_hi'])} | "
            f"{_signed(r['predicted'])} |"
        )
    return lines


def dose_markdown(dose: pd.DataFrame, fit: pd.DataFrame, source: str = "",
                  notes: dict[str, str] | None = None, paired: pd.DataFrame | None = None,
                  ratios: pd.DataFrame | None = None) -> str:  # fmt: skip
    """aware_sweep/summary.md, per optimizer: the contrast in tokens per level and arm (90 % over
    seeds, sign and Wilcoxon p, the latter also adjusted over the arm's levels, the prediction,
    the net of the tail-frozen control with Welch's interval, the detectable mean and the power
    against the prediction); each mode's drift beside its prediction and net, the common drift in
    log(1 + T) and the truncated share; the seed-paired differences (`paired`) and the ratios to
    the reference arm (`ratios`) when given; then the fit of measured on predicted. The
    prediction: the SGD closed form through the kernel, in tokens; under Adam the push's SNR and
    one Adam coordinate's drift. Every number from the tables; notes: a line under each
    optimizer's heading (`rate_notes`)."""
    lines = ["# The aware tail's dose-response", ""]
    if source:
        lines += [f"From {source}.", ""]
    by = dose.set_index(["optimizer", "level", "dial", "quantity"])
    for opt, g in dose.groupby("optimizer", sort=False):
        drawn = "adam_first_order" in g and g["adam_first_order"].notna().any()
        pred = ("SGD closed form" if opt == "sgd" else "SNR (one Adam coordinate; first order)"
                if drawn else "SNR (one Adam coordinate)")  # fmt: skip
        note = (notes or {}).get(opt)
        lines += [f"## {opt}", "", *([note, ""] if note else [])]
        lines += [*_contrast_table(g, by, opt, pred), "", *_modes_table(g, by, opt, pred), ""]
        if paired is not None and len(paired[paired["optimizer"] == opt]):
            lines += [*_paired_table(paired[paired["optimizer"] == opt]), ""]
        if ratios is not None and len(ratios[ratios["optimizer"] == opt]):
            lines += [*_ratio_table(ratios[ratios["optimizer"] == opt]), ""]
    if len(fit):
        lines += ["## Measured on predicted, over levels and arms", "",
                  "Through the origin (slope, R^2), and the least-squares line with an intercept "
                  "(the intercept is the offset every cell shares; compare the control's).", "",
                  "| optimizer | quantity | predictor | slope | R^2 | Spearman (p) | "
                  "line: slope | intercept | R^2 | cells |",
                  "|---|---|---|---|---|---|---|---|---|---|"]  # fmt: skip
        for _, f in fit.iterrows():
            lines.append(
                f"| {f['optimizer']} | {f['quantity']} | {f['predictor']} | {f['slope']:.3g} | "
                f"{f['r2']:.2f} | {f['spearman']:+.2f} ({_p(f['spearman_p'])}) | "
                f"{f['slope_affine']:.3g} | {f['intercept']:+.3f} | {f['r2_affine']:.2f} | "
                f"{int(f['n'])} |"
            )
    return "\n".join(lines).rstrip() + "\n"

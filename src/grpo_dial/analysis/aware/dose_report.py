"""aware_sweep/summary.md: the dose table and fit (analysis/aware/dose.py) as markdown, and the
one-step probe's table and fit (analysis/aware/probe.py) after them."""

from __future__ import annotations

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


def _predicted(row, optimizer: str) -> str:
    """The prediction beside a measured cell: the SGD closed form, or Adam's SNR (and drift)."""
    if optimizer == "sgd":
        return f"{row['predicted']:+.2f}"
    return f"{row['snr']:.2f} ({row['adam_tabular']:+.2f})"


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
    """The one-step probe as markdown: per level and arm, each mode's measured move per unit lr
    and their contrast (x 10^3, mean [90 %] over batches) beside the closed form through the
    kernel, the contrast's ratio to the reference arm's (+- its SE) beside the predicted ratio,
    and the share of batches the clip would cut; then the fit of measured on predicted."""
    lines = [
        "## The one-step probe (aware_sweep/probe.csv)", "",
        "SGD's expected first step at the base policy through the transformer, per unit lr, "
        "x 10^-3 (mean [90 %] over batches), beside the closed form through the kernel.", "",
        "| a | arm | batches | contrast | predicted | wrong mode | predicted | right mode | "
        "predicted | contrast / reference | predicted | clipped share |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]  # fmt: skip
    by = probe.set_index(["level", "dial", "quantity"])
    k = PROBE_SCALE
    for (lev, d), _ in probe.groupby(["level", "dial"], sort=False):
        c, w, r = (by.loc[(lev, d, q)] for q in ("contrast", "wrong", "correct"))
        lines.append(
            f"| {c['a']:.1f} | {d} | {int(c['n_batches'])} | {_probe_cell(c)} | "
            f"{k * c['predicted']:+.2f} | {_probe_cell(w)} | {k * w['predicted']:+.2f} | "
            f"{_probe_cell(r)} | {k * r['predicted']:+.2f} | {c['ratio_reference']:+.2f} +- "
            f"{c['ratio_reference_se']:.2f} | {c['predicted_ratio_reference']:+.2f} | "
            f"{100 * c['clip_share']:.0f} % |"
        )
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


def dose_markdown(dose: pd.DataFrame, fit: pd.DataFrame, source: str = "",
                  notes: dict[str, str] | None = None) -> str:  # fmt: skip
    """aware_sweep/summary.md: per optimizer, a table of each level and arm's measured contrast
    and wrong-mode drift in tokens (90 % over seeds, sign and Wilcoxon p, the latter also
    adjusted over the arm's levels) beside the prediction
    (the SGD closed form through the kernel, in tokens; under Adam the push's SNR and one Adam
    coordinate's drift), each drift net of the tail-frozen control (Welch's interval), the common
    drift d_common in log(1 + T) and the last window's largest
    truncated share; then the fit of measured on predicted. Every number from `dose` and `fit`;
    notes: a line under each optimizer's heading (`rate_notes`)."""
    lines = ["# The aware tail's dose-response", ""]
    if source:
        lines += [f"From {source}.", ""]
    by = dose.set_index(["optimizer", "level", "dial", "quantity"])
    for opt, g in dose.groupby("optimizer", sort=False):
        pred = "SGD closed form" if opt == "sgd" else "SNR (one Adam coordinate)"
        note = (notes or {}).get(opt)
        lines += [
            f"## {opt}", "", *([note, ""] if note else []),
            f"| a | arm | seeds | contrast, tokens | sign / Wilcoxon p (BH) | {pred} | "
            f"net of the control | wrong-mode drift, tokens | sign / Wilcoxon p (BH) | {pred} | "
            "net of the control | right-mode drift, tokens | net of the control | "
            "common drift, log(1 + T) | truncated, last window (max) |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
        ]  # fmt: skip
        for (lev, d), _ in g.groupby(["level", "dial"], sort=False):
            c, w = by.loc[(opt, lev, d, "contrast_tokens")], by.loc[(opt, lev, d, "d_wrong_tokens")]
            r, m = by.loc[(opt, lev, d, "d_correct_tokens")], by.loc[(opt, lev, d, "d_common")]

            lines.append(
                f"| {c['a']:.1f} | {d} | {int(c['n_seeds'])} | {_cell(c)} | {_tests(c)} | "
                f"{_predicted(c, opt)} | {_net(c)} | {_cell(w)} | {_tests(w)} | "
                f"{_predicted(w, opt)} | {_net(w)} | {_cell(r)} | {_net(r)} | {_cell(m)} | "
                f"{100 * c['truncation_last']:.1f} % |"
            )
        lines.append("")
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

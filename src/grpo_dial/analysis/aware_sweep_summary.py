"""aware_sweep/summary.md: the dose table and fit (analysis/aware_sweep.py) as markdown."""

from __future__ import annotations

import pandas as pd


def _p(x) -> str:
    return "n/a" if pd.isna(x) else f"{x:.2g}"


def _cell(r) -> str:
    """One quantity over seeds: mean [90 %], or the seeds' range below 3 seeds."""
    from grpo_dial.analysis.summary_format import over_seeds, signed

    return over_seeds(r["mean"], r["lo"], r["hi"], r["n_seeds"], r["min"], r["max"], signed,
                      digits=2)  # fmt: skip


def _predicted(row, optimizer: str) -> str:
    """The prediction beside a measured cell: the SGD closed form, or Adam's SNR (and drift)."""
    if optimizer == "sgd":
        return f"{row['predicted']:+.2f}"
    return f"{row['snr']:.2f} ({row['adam_tabular']:+.2f})"


def dose_markdown(dose: pd.DataFrame, fit: pd.DataFrame, source: str = "") -> str:
    """aware_sweep/summary.md: per optimizer, a table of each level and arm's measured contrast
    and wrong-mode drift in tokens (90 % over seeds, sign and Wilcoxon p) beside the prediction
    (the SGD closed form through the kernel, in tokens; under Adam the push's SNR and one Adam
    coordinate's drift), the common drift d_common in log(1 + T) and the last window's largest
    truncated share; then the fit of measured on predicted. Every number from `dose` and `fit`."""
    lines = ["# The aware tail's dose-response", ""]
    if source:
        lines += [f"From {source}.", ""]
    by = dose.set_index(["optimizer", "level", "dial", "quantity"])
    for opt, g in dose.groupby("optimizer", sort=False):
        pred = "SGD closed form" if opt == "sgd" else "SNR (one Adam coordinate)"
        lines += [
            f"## {opt}", "",
            f"| a | arm | seeds | contrast, tokens | sign / Wilcoxon p | {pred} | "
            f"wrong-mode drift, tokens | sign / Wilcoxon p | {pred} | right-mode drift, tokens "
            "| common drift, log(1 + T) | truncated, last window (max) |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|",
        ]  # fmt: skip
        for (lev, d), _ in g.groupby(["level", "dial"], sort=False):
            c, w = by.loc[(opt, lev, d, "contrast_tokens")], by.loc[(opt, lev, d, "d_wrong_tokens")]
            r, m = by.loc[(opt, lev, d, "d_correct_tokens")], by.loc[(opt, lev, d, "d_common")]

            lines.append(
                f"| {c['a']:.1f} | {d} | {int(c['n_seeds'])} | {_cell(c)} | {_p(c['sign_p'])} / "
                f"{_p(c['wilcoxon_p'])} | {_predicted(c, opt)} | {_cell(w)} | {_p(w['sign_p'])} / "
                f"{_p(w['wilcoxon_p'])} | {_predicted(w, opt)} | {_cell(r)} | {_cell(m)} | "
                f"{100 * c['truncation_last']:.1f} % |"
            )
        lines.append("")
    if len(fit):
        lines += ["## Measured on predicted, over levels and arms", "",
                  "| optimizer | quantity | predictor | slope | R^2 | Spearman (p) | cells |",
                  "|---|---|---|---|---|---|---|"]  # fmt: skip
        for _, f in fit.iterrows():
            lines.append(
                f"| {f['optimizer']} | {f['quantity']} | {f['predictor']} | {f['slope']:.3g} | "
                f"{f['r2']:.2f} | {f['spearman']:+.2f} ({_p(f['spearman_p'])}) | {int(f['n'])} |"
            )
    return "\n".join(lines).rstrip() + "\n"

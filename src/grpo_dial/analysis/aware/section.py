"""The aware tail's lines of the run's front page, results/summary.md
(analysis/summary/page.py): the drift table over seeds (analysis.aware.seeds.drift_table) and
the real-model bridge (analysis/aware/bridge.py)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from grpo_dial.analysis.aware.runs import TAKEOFF
from grpo_dial.analysis.markdown import over_seeds, signed


def _p(x) -> str:
    return "n/a" if pd.isna(x) else f"{x:.2g}"


def summary_lines(drift: pd.DataFrame, bridge: pd.DataFrame | None = None) -> list[str]:
    """Markdown lines for summary.md (analysis/summary/page.py calls this): per dial the
    drift of the mode contrast in log(1 + tail tokens) and in tokens (90 % over seeds), the sign and
    Wilcoxon p over seeds, the take-offs with Fisher's p against the null arm, the last window's
    largest truncated share, and the closed form's SGD and SNR ratios; the real-model bridge's
    within-group AUC, informative problems and push when given."""
    con = drift[drift["quantity"] == "contrast"]
    tok = drift[drift["quantity"] == "contrast_tokens"].set_index("dial")
    lines = [
        "- Aware tail, drift of the mode contrast log(1 + T~) - log(1 + T=) from the base "
        "policy (step 0) to the last window, 90 % over seeds; sign / Wilcoxon p over seeds; "
        f"take-offs (|contrast| > {TAKEOFF}) up / down with Fisher's p against the null arm:"
    ]
    for _, r in con.iterrows():
        cell = over_seeds(r["mean"], r["lo"], r["hi"], r.get("n_seeds"), r.get("min"),
                          r.get("max"), signed, digits=2)  # fmt: skip
        t = tok.loc[r["dial"]] if r["dial"] in tok.index else None
        tokens = "" if t is None else (
            ", tokens " + over_seeds(t["mean"], t["lo"], t["hi"], t.get("n_seeds"), t.get("min"),
                                     t.get("max"), signed, digits=1)
        )  # fmt: skip
        lines.append(
            f"  - {r['dial']}: {cell}{tokens}; sign p {_p(r['sign_p'])}, Wilcoxon p "
            f"{_p(r['wilcoxon_p'])}; take-offs {int(r['n_up'])} / {int(r['n_down'])} of "
            f"{int(r['n_seeds'])} (Fisher p {_p(r['takeoff_p'])}); truncated at most "
            f"{100 * r['truncation_last']:.1f} % (last window); closed form / GRPO: SGD "
            f"{r['ratio_sgd']:.2f}, SNR {r['ratio_snr']:.2f}"
        )
    if bridge is not None and len(bridge):
        if "source" not in bridge.columns:
            bridge = bridge.assign(source="math_cot_100")
        for source, b in bridge.groupby("source", sort=False):
            b = b.set_index("quantity")
            n = b.loc["auc", "n_informative"] if "n_informative" in b.columns else np.nan
            informative = "" if pd.isna(n) else (
                f" ({int(n)} informative problems of {int(b.loc['auc', 'n_problems'])})"
            )  # fmt: skip
            lines.append(
                f"- Real samples ({source}): within-group AUC of length for being wrong "
                f"{b.loc['auc', 'value']:.2f} [{b.loc['auc', 'lo']:.2f}, "
                f"{b.loc['auc', 'hi']:.2f}]{informative}; GRPO's 1/|o| pushes wrong answers by "
                f"{b.loc['pressure_wrong', 'value']:+.0f} [{b.loc['pressure_wrong', 'lo']:+.0f}, "
                f"{b.loc['pressure_wrong', 'hi']:+.0f}] characters per unit advantage."
            )
    return lines

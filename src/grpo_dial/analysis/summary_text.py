"""The run's key numbers in plain sentences, generated from the result tables (never typed).

`summary_markdown(tables)` takes whichever tables exist (by name) and writes a section for each:
`training` (the cross-run summary), `group_size` (theory), `simulate`, `difficulty` (the base
policy's difficulty summary), `real_lengths` (length by correctness on logged responses), `dapo`,
and `allocation` / `allocation_bands` (adaptive against uniform group sizes).
"""

from __future__ import annotations

from collections.abc import Mapping

import pandas as pd


def _pct(x: float) -> str:
    return "n/a" if pd.isna(x) else f"{100 * x:.0f}%"


def _num(x: float, digits: int = 1) -> str:
    return "n/a" if pd.isna(x) else f"{x:+.{digits}f}"


def _len(x: float) -> str:
    return "n/a" if pd.isna(x) else f"{x:.0f}"


def _training(t: pd.DataFrame) -> list[str]:
    lines = ["## Length by correctness in the RL runs", ""]
    for dial, runs in t.groupby("dial", sort=False):
        parts = []
        for _, r in runs.iterrows():
            parts.append(
                f"seed {r['seed']}: length {r['length_before']:.1f} -> {r['length_after']:.1f} "
                f"characters ({_num(r['total'])} [{_num(r['total_lo'])}, {_num(r['total_hi'])}]), "
                f"{_pct(r['incorrect_share'])} of it within incorrect responses "
                f"[{_pct(r['incorrect_share_lo'])}, {_pct(r['incorrect_share_hi'])}] "
                f"(work {_num(r['within_incorrect_work'])}, padding "
                f"{_num(r['within_incorrect_redundant'])}), mix {_num(r['mix'])}, within correct "
                f"{_num(r['within_correct'])}; training accuracy {_pct(r['accuracy_before'])} -> "
                f"{_pct(r['accuracy_after'])}; held-out sampled accuracy "
                f"{_pct(r['heldout_sampled_before'])} -> {_pct(r['heldout_sampled_after'])} "
                f"(greedy {_pct(r['heldout_greedy_before'])} -> "
                f"{_pct(r['heldout_greedy_after'])}); final silent fraction "
                f"{_pct(r['final_silent_fraction'])}; extreme-prompt gradient mass "
                f"{_pct(r['extreme_mass_share'])}; extra samples {r['extra_samples']}"
            )
        lines.append(f"- **{dial}**: " + "; ".join(parts) + ".")
    mean = t.groupby("dial", sort=False)[["incorrect_share", "total"]].mean()
    lines += ["", "Mean over seeds, share of the length change within incorrect responses: "
              + ", ".join(f"{d} {_pct(r['incorrect_share'])} (total {_num(r['total'])})"
                          for d, r in mean.iterrows()) + ".", ""]  # fmt: skip
    return lines


def _interval(r: pd.Series, prefix: str, fmt: str) -> str:
    mean, lo, hi = r[f"{prefix}_mean"], r[f"{prefix}_lo"], r[f"{prefix}_hi"]
    if pd.isna(mean):
        return "n/a"
    return f"{mean:{fmt}}" + ("" if pd.isna(lo) else f" [{lo:{fmt}}, {hi:{fmt}}]")


def _verdict(r: pd.Series, better: str) -> str:
    """'no detectable difference' unless the paired interval excludes 0."""
    if pd.isna(r["diff_lo"]):
        return "one seed: no interval"
    if r["diff_lo"] > 0 or r["diff_hi"] < 0:
        up = r["diff_lo"] > 0
        return "adaptive " + (better if up else {"higher": "lower", "more": "fewer"}[better])
    return "no detectable difference"


def _allocation(t: pd.DataFrame, bands: pd.DataFrame | None) -> list[str]:
    lines = ["## Adaptive against uniform group sizes (equal samples per step)", ""]
    for (adaptive, uniform), rows in t.groupby(["adaptive", "uniform"], sort=False):
        r = rows.set_index("metric")
        parts = []
        for metric in ("final_sampled_accuracy", "final_greedy_accuracy"):
            if metric in r.index:
                m, mode = r.loc[metric], metric.split("_")[1]
                parts.append(
                    f"final held-out {mode} accuracy {_interval(m, 'adaptive', '.3f')}"
                    f" vs {_interval(m, 'uniform', '.3f')}, difference "
                    f"{_interval(m, 'diff', '+.3f')} ({_verdict(m, 'higher')})"
                )
        if "samples_to_target" in r.index:
            m = r.loc["samples_to_target"]
            parts.append(
                f"samples to reach accuracy {m['target']:.3f}: {_interval(m, 'adaptive', '.0f')} "
                f"({int(m['reached_adaptive'])}/{int(m['n_seeds'])} seeds got there) vs "
                f"{_interval(m, 'uniform', '.0f')} ({int(m['reached_uniform'])}/"
                f"{int(m['n_seeds'])}); adaptive reached it with fewer samples: "
                + (
                    "yes" if m["diff_hi"] < 0 else "no" if m["diff_lo"] > 0
                    else "not shown (interval contains 0 or too few seeds reached it)"
                )
            )
        for metric, label, verdict in (
            ("silent_fraction", "silent groups", False),
            ("silent_sample_share", "samples in silent groups", True),
        ):
            if metric in r.index:
                m = r.loc[metric]
                arms = f"{_interval(m, 'adaptive', '.2f')} vs {_interval(m, 'uniform', '.2f')}"
                text = f"{label} {arms}"
                parts.append(text + (f" ({_verdict(m, 'higher')})" if verdict else ""))
        lines.append(f"- **{adaptive}** against **{uniform}** (n = "
                     f"{int(r['n_seeds'].iloc[0])} seeds): " + "; ".join(parts) + ".")
        if bands is not None and len(bands):
            share = bands.groupby(["dial", "band"], sort=False)[["samples_share", "mean_G"]].mean()
            for arm in (adaptive, uniform):
                if arm in share.index.get_level_values(0):
                    cells = ", ".join(
                        f"{band} {_pct(v['samples_share'])} (G {v['mean_G']:.1f})"
                        for band, v in share.loc[arm].iterrows()
                    )
                    lines.append(f"  - samples of {arm} by base pass-rate band: {cells}.")
    return [*lines, ""]


def _group_size(t: pd.DataFrame) -> list[str]:
    cells = ", ".join(
        f"p = {r['p']:g} at {r['fidelity']:.0%}: {int(r['g_exact'])} "
        f"({int(r['g_closed_form_nearest'])})"
        for _, r in t.iterrows()
    )
    return ["## Group size for fidelity", "",
            f"Exact smallest G (closed form rounded to nearest): {cells}.", ""]  # fmt: skip


def _simulate(t: pd.DataFrame) -> list[str]:
    parts = [
        f"{r['arm']} (lr {r['lr']:.3g}): silent R^2 {r['silent_r2']:.3f}, extreme mass at the "
        f"first step {_pct(r['initial_extreme_mass'])}, hardest quartile ends at "
        f"{r['hardest_quartile_final_p']:.2f}, {r['oversampling_factor']:.2f}x samples"
        for _, r in t.iterrows()
    ]
    return ["## Controlled Bernoulli-logit run", "", "; ".join(parts) + ".", ""]


def _difficulty(t: pd.DataFrame) -> list[str]:
    v = t.set_index("metric")["value"]
    return [
        "## The base policy's pass rates", "",
        f"{int(v['n_prompts'])} prompts: {_pct(v['never_solved_fraction'])} never solved, "
        f"{_pct(v['always_solved_fraction'])} always solved; extreme prompts get "
        f"{_pct(v['extreme_share_grpo'])} of GRPO's gradient mass and "
        f"{_pct(v['extreme_share_dr_grpo'])} of Dr. GRPO's; {_pct(v['silent_fraction_G8'])} of "
        "groups are silent at G = 8.", "",
    ]  # fmt: skip


def _real_lengths(t: pd.DataFrame) -> list[str]:
    parts = []
    for _, r in t.iterrows():
        interval = "" if pd.isna(r["diff_lo"]) else f" [{r['diff_lo']:+.0f}, {r['diff_hi']:+.0f}]"
        parts.append(
            f"{r['source']} {r['difficulty']}: correct {_len(r['mean_len_correct'])}, incorrect "
            f"{_len(r['mean_len_incorrect'])} characters (difference {_num(r['diff'], 0)}"
            f"{interval})"
        )
    return ["## Length by correctness in logged real responses", "", "; ".join(parts) + ".", ""]


def _dapo(t: pd.DataFrame) -> list[str]:
    r = t.set_index("model")
    one, two = r.loc["closed_form"], r.loc["saturating"]
    text = (
        f"One-timescale closed form R^2 {one['r2']:.3f} [{one['r2_lo']:.3f}, "
        f"{one['r2_hi']:.3f}] against {two['r2']:.3f} for a two-parameter curve."
    )
    return ["## DAPO consistency", "", text, ""]


def _external(name: str, t: pd.DataFrame) -> list[str]:
    v = t.set_index("metric")["value"]
    pairs = ", ".join(f"{metric} {value:.3g}" for metric, value in v.items())
    return [f"## Imported run {name}", "", pairs + ".", ""]


SECTIONS = {
    "training": _training,
    "difficulty": _difficulty,
    "real_lengths": _real_lengths,
    "simulate": _simulate,
    "group_size": _group_size,
    "dapo": _dapo,
}


def summary_markdown(tables: Mapping[str, pd.DataFrame]) -> str:
    """Markdown with one section per table present, in a fixed order."""
    lines = ["# grpo-dial: summary of this run", "",
             "Generated from the result tables by the `summary` rule.", ""]  # fmt: skip
    for name, section in SECTIONS.items():
        if name in tables and len(tables[name]):
            lines += section(tables[name])
        if name == "training" and "allocation" in tables and len(tables["allocation"]):
            lines += _allocation(tables["allocation"], tables.get("allocation_bands"))
    for name, table in tables.items():
        if name.startswith("external_") and len(table):
            lines += _external(name.removeprefix("external_"), table)
    return "\n".join(lines).rstrip() + "\n"


__all__ = ["summary_markdown"]

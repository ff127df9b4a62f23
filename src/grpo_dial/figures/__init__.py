"""Figures, drawn only from the pipeline's tidy tables (never from in-memory model state).

Every public function takes DataFrames and returns a matplotlib Figure whose suptitle states
the finding in one sentence, computed from the table it draws. A figure that names arms takes
`names` (arm key -> display name; the stages pass grpo_dial.core.arm_names.display_names()) and
shows an arm missing from it, or every arm when no table is passed, by its key: the package holds
no state.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import seaborn as sns  # noqa: E402

COLORS = {  # arm key -> colour: the one palette
    "grpo": "#1f4e79",
    "dr_grpo": "#c0504d",
    "dapo": "#4f8f3a",
    "dr_grpo_lr_matched": "#e69f00",
    "hadw": "#7f5fa8",
    "hadw_prompt": "#17becf",
    "std_constant": "#e69f00",
    "nostd_sequence": "#7f5fa8",
    "lambda_pos": "#17becf",
    "lambda_neg": "#8c564b",
    "rloo": "#9467bd",  # the engines' estimators
    "opo": "#bcbd22",
    "opo_constant": "#bcbd22",
    "grpo_passk": "#ff7f0e",
    "batch_std": "#2ca02c",
    "gpg": "#98df8a",
    "gpg_paper": "#d4e09b",
    "reinforce_pp_baseline": "#d62728",
    "reinforce_pp_baseline_response": "#f4a582",
    "reinforce_pp": "#ff9896",
}


def theme() -> None:
    """One look for every figure: white grid, readable font sizes."""
    sns.set_theme(style="whitegrid", context="paper", font_scale=1.15)


def label(arm: str, names: Mapping[str, str] | None = None) -> str:
    """Display name of a recipe or arm: names[arm], or the key itself when absent."""
    return (names or {}).get(arm, arm)


def palette(arms: Iterable[str], names: Mapping[str, str] | None = None) -> dict[str, str]:
    """Display name (`label`) -> colour of the arms `arms` (keys), grey for an arm without one."""
    return {label(a, names): COLORS.get(a, "grey") for a in arms}


def shown(table, names: Mapping[str, str] | None = None):
    """`table` (a DataFrame with a `dial` column) with that column as display names (`label`)."""
    return table.assign(dial=table["dial"].map(lambda d: label(d, names)))


def save(fig: plt.Figure, png: str | Path, pdf: str | Path | None = None) -> None:
    """Write the figure as PNG (and PDF), creating directories, then close it."""
    for path in (png, pdf):
        if path is None:
            continue
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(path, dpi=150, bbox_inches="tight")
    plt.close(fig)


def save_outputs(fig: plt.Figure, output: Mapping[str, str], name: str) -> None:
    """`save` to a rule's outputs `<name>_png` (and `<name>_pdf` where the rule has one)."""
    save(fig, output[f"{name}_png"], output.get(f"{name}_pdf"))

"""Figures, drawn only from the pipeline's tidy tables (never from in-memory model state).

Every public function takes DataFrames and returns a matplotlib Figure whose suptitle states
the finding in one sentence, computed from the table it draws.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import seaborn as sns  # noqa: E402

NAMES: dict[str, str] = {}  # arm key -> display name, handed in by the stages (use_names)
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
}


def use_names(names: Mapping[str, str]) -> None:
    """Take the arms' display names (grpo_dial.core.arm_names.ARM_NAMES, with the registered
    estimators' labels): every figure stage hands them in, since figures import nothing else of
    grpo_dial. Replaces the names held before."""
    NAMES.clear()
    NAMES.update(names)


def theme() -> None:
    """One look for every figure: white grid, readable font sizes."""
    sns.set_theme(style="whitegrid", context="paper", font_scale=1.15)


def label(name: str) -> str:
    """Display name of a recipe or arm (its key when no name was handed in)."""
    return NAMES.get(name, name)


def palette(names: Iterable[str]) -> dict[str, str]:
    """Display name -> colour of the arms `names` (keys), grey for an arm without a colour."""
    return {label(n): COLORS.get(n, "grey") for n in names}


def save(fig: plt.Figure, png: str | Path, pdf: str | Path | None = None) -> None:
    """Write the figure as PNG (and PDF), creating directories, then close it."""
    for path in (png, pdf):
        if path is None:
            continue
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(path, dpi=150, bbox_inches="tight")
    plt.close(fig)

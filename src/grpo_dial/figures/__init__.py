"""Figures, drawn only from the pipeline's tidy tables (never from in-memory model state).

Every public function takes DataFrames and returns a matplotlib Figure whose suptitle states
the finding in one sentence, computed from the table it draws.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import seaborn as sns  # noqa: E402

LABELS = {  # arm or recipe name -> its name in every figure (one table for all figures)
    "grpo": "GRPO",
    "dr_grpo": "Dr. GRPO",
    "dapo": "DAPO",
    "dr_grpo_lr_matched": "Dr. GRPO (lr matched)",
    "hadw": "HA-DW (batch anchor)",
    "hadw_prompt": "HA-DW (prompt anchor)",
    "std_constant": "alpha 1 + constant",
    "nostd_sequence": "alpha 0 + 1/|o|",
    "lambda_pos": "lambda +1",
    "lambda_neg": "lambda -1",
}
COLORS = {  # label -> colour: the one palette
    "GRPO": "#1f4e79",
    "Dr. GRPO": "#c0504d",
    "DAPO": "#4f8f3a",
    "Dr. GRPO (lr matched)": "#e69f00",
    "HA-DW (batch anchor)": "#7f5fa8",
    "HA-DW (prompt anchor)": "#17becf",
    "alpha 1 + constant": "#e69f00",
    "alpha 0 + 1/|o|": "#7f5fa8",
    "lambda +1": "#17becf",
    "lambda -1": "#8c564b",
}


def use_labels(extra: dict[str, str]) -> None:
    """Add names (a registered estimator's recipe -> its label) the tables above lack; the
    stages hand them in, since figures import nothing else of grpo_dial."""
    for name, text in extra.items():
        LABELS.setdefault(name, text)


def theme() -> None:
    """One look for every figure: white grid, readable font sizes."""
    sns.set_theme(style="whitegrid", context="paper", font_scale=1.15)


def label(name: str) -> str:
    """Display name of a recipe or arm."""
    return LABELS.get(name, name)


def save(fig: plt.Figure, png: str | Path, pdf: str | Path | None = None) -> None:
    """Write the figure as PNG (and PDF), creating directories, then close it."""
    for path in (png, pdf):
        if path is None:
            continue
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(path, dpi=150, bbox_inches="tight")
    plt.close(fig)

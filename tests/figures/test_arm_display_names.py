"""The arms' display names come from one table, grpo_dial.core.arm_names: the figure stages hand
it to the figures, the summary reads it, the palette is keyed by the same arm keys, and no other
module spells an arm's name."""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib import pyplot as plt

from grpo_dial import figures
from grpo_dial.analysis.simulate import ARMS, SimulationConfig, simulate
from grpo_dial.analysis.simulate_summary import summarize
from grpo_dial.analysis.summary_training import RUNS, rl_runs
from grpo_dial.core.arm_names import ARM_NAMES
from grpo_dial.figures.simulation import simulation_figure
from grpo_dial.stages.registry import stage_for

PACKAGE = Path(__file__).resolve().parents[2] / "src" / "grpo_dial"


def test_a_figure_stage_hands_every_figure_the_one_table():
    figures.use_names({})
    stage_for("simulation_figure")
    assert {arm: figures.label(arm) for arm in ARM_NAMES} == ARM_NAMES
    steps, prompts = simulate(np.random.default_rng(0).beta(0.7, 0.9, 300),
                              SimulationConfig(n_prompts=40, steps=2))  # fmt: skip
    fig = simulation_figure(steps, prompts, summarize(steps, prompts))
    legend = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert legend == [ARM_NAMES[arm] for arm in ARMS]
    plt.close(fig)


def test_the_palette_is_keyed_by_arm_keys():
    assert set(figures.COLORS) <= set(ARM_NAMES)
    assert figures.palette(["grpo", "no_such_arm"]) == {
        figures.label("grpo"): figures.COLORS["grpo"], "no_such_arm": "grey"
    }


def test_the_summary_names_arms_from_the_table():
    cols = ["accuracy_before", "accuracy_after", "heldout_sampled_before", "heldout_sampled_after",
            "heldout_greedy_before", "heldout_greedy_after", "incorrect_share",
            "within_incorrect_work", "within_incorrect_redundant", "mix", "within_correct",
            "final_silent_fraction", "extreme_mass_share", "incorrect_share_lo",
            "incorrect_share_hi"]  # fmt: skip
    runs = pd.DataFrame([{"dial": d, "seed": 0, "total": 1.0, "total_lo": 0.0, "total_hi": 2.0,
                          **dict.fromkeys(cols, 0.5)} for d in ("grpo", "nostd_sequence")])
    text = "\n".join(rl_runs({RUNS: runs}))
    for dial in ("grpo", "nostd_sequence"):
        assert f"| {ARM_NAMES[dial]} | 1 |" in text and f"| {ARM_NAMES[dial]} | 0 |" in text


def _name_tables(path: Path) -> list[int]:
    """Lines of dict literals mapping two or more arm keys to strings other than colours."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if not isinstance(node, ast.Dict):
            continue
        pairs = [(k.value, v.value) for k, v in zip(node.keys, node.values, strict=True)
                 if isinstance(k, ast.Constant) and isinstance(v, ast.Constant)]  # fmt: skip
        names = [k for k, v in pairs
                 if k in ARM_NAMES and isinstance(v, str) and not v.startswith("#")]  # fmt: skip
        if len(names) >= 2:
            found.append(node.lineno)
    return found


def test_no_other_module_holds_a_table_of_arm_names():
    tables = {
        str(p.relative_to(PACKAGE)): lines
        for p in sorted(PACKAGE.rglob("*.py"))
        if p != PACKAGE / "core" / "arm_names.py" and (lines := _name_tables(p))
    }
    assert not tables, tables
    assert _name_tables(PACKAGE / "core" / "arm_names.py")  # the guard sees the one table

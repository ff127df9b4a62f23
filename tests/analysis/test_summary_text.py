"""Tests for grpo_dial.analysis.summary_text: every sentence is read off the tables it is given."""

from __future__ import annotations

import pandas as pd

from grpo_dial.analysis.summary_text import summary_markdown

GROUP_SIZE = pd.DataFrame(
    {
        "p": [0.5, 0.05],
        "fidelity": [0.9, 0.99],
        "g_exact": [7, 273],
        "g_closed_form_nearest": [5, 263],
    }
)
DIFFICULTY = pd.DataFrame(
    {
        "metric": [
            "n_prompts",
            "never_solved_fraction",
            "always_solved_fraction",
            "extreme_share_grpo",
            "extreme_share_dr_grpo",
            "silent_fraction_G8",
        ],
        "value": [215608, 0.04, 0.072, 0.247, 0.139, 0.44],
    }
)
DAPO = pd.DataFrame(
    {
        "model": ["closed_form", "saturating"],
        "r2": [0.95, 0.97],
        "r2_lo": [0.9, float("nan")],
        "r2_hi": [0.99, float("nan")],
    }
)
REAL = pd.DataFrame(
    {
        "source": ["math_cot_100"],
        "difficulty": ["Level 5"],
        "mean_len_correct": [612.4],
        "mean_len_incorrect": [1013.6],
        "diff": [401.2],
        "diff_lo": [float("nan")],
        "diff_hi": [float("nan")],
    }
)


def test_sections_come_in_a_fixed_order_with_the_tables_numbers():
    text = summary_markdown(
        {"dapo": DAPO, "group_size": GROUP_SIZE, "difficulty": DIFFICULTY, "real_lengths": REAL}
    )
    headings = [line for line in text.splitlines() if line.startswith("## ")]
    assert headings == [
        "## The base policy's pass rates",
        "## Length by correctness in logged real responses",
        "## Group size for fidelity",
        "## DAPO consistency",
    ]
    assert "p = 0.5 at 90%: 7 (5), p = 0.05 at 99%: 273 (263)" in text
    assert "215608 prompts: 4% never solved, 7% always solved" in text
    assert "25% of GRPO's gradient mass and 14% of Dr. GRPO's; 44% of groups" in text
    assert "R^2 0.950 [0.900, 0.990] against 0.970" in text
    # one logged source without an interval: no brackets invented
    assert "correct 612, incorrect 1014 characters (difference +401)" in text
    assert text.endswith(".\n")


def test_empty_or_missing_tables_give_no_section_and_external_runs_come_last():
    external = pd.DataFrame({"metric": ["silent_fraction"], "value": [0.123456]})
    text = summary_markdown(
        {"group_size": GROUP_SIZE.iloc[:0], "external_my_run": external, "dapo": DAPO}
    )
    assert "Group size" not in text
    assert text.index("## DAPO consistency") < text.index("## Imported run my_run")
    assert "silent_fraction 0.123." in text
    assert summary_markdown({}).startswith("# grpo-dial: summary of this run")

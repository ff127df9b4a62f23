"""The RL runs' summary table (analysis.training.runs): the answer checker's failures summed per
run, and the closed-form silent rate at the base pass rates per step."""

from __future__ import annotations

import pandas as pd
import pytest

from grpo_dial.analysis.training.runs import expected_silent_base, summarize_runs

QUANTITIES = ("a0 a1 L0 L1 total mix within_correct within_incorrect within_incorrect_work "
              "within_incorrect_redundant").split()  # fmt: skip


def test_summary_sums_the_checker_columns_per_run():
    steps = pd.DataFrame({
        "dial": ["grpo"] * 3, "seed": [0] * 3, "step": [1, 2, 3], "silent_fraction": 0.5,
        "samples": 16, "checker_timeouts": [0, 2, 1], "checker_errors": [1, 0, 0],
        "checker_crashes": 0, "checker_bad_references": [0, 0, 4],
    })  # fmt: skip
    terms = pd.DataFrame({"quantity": QUANTITIES, "value": 0.1, "lo": 0.0, "hi": 0.2,
                          "share": 0.5, "share_lo": 0.4, "share_hi": 0.6})  # fmt: skip
    terms["dial"], terms["seed"] = "grpo", 0
    mass = pd.DataFrame({"dial": "grpo", "seed": 0, "band": ["extreme"], "mass": [1.0]})
    evals = pd.DataFrame({"dial": "grpo", "seed": 0, "difficulty": "all", "mode": ["greedy"],
                          "step": [0], "accuracy": [0.5]})  # fmt: skip
    row = summarize_runs(steps, terms, mass, evals, 4, 4).iloc[0]
    assert (row["checker_timeouts"], row["checker_errors"], row["checker_crashes"],
            row["checker_bad_references"]) == (3, 1, 0, 4)  # fmt: skip


def test_expected_silent_base_averages_first_round_groups_per_step():
    """Step 1: p = 0.5 at G = 2 (silent 0.5) and p = 1 (silent 1); a refill round is left out."""
    responses = pd.DataFrame({
        "step": [1, 1, 1, 1, 1, 2], "group": [0, 0, 1, 1, 2, 0], "G": 2,
        "prompt_id": ["a", "a", "b", "b", "a", "b"], "resample_round": [0, 0, 0, 0, 1, 0],
    })  # fmt: skip
    table = pd.DataFrame({"prompt_id": ["a", "b"], "p_hat": [0.5, 1.0]})
    expected = expected_silent_base(responses, table)
    assert expected.to_dict() == pytest.approx({1: 0.75, 2: 1.0})

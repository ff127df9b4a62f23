"""Tests for grpo_dial.analysis.channel: the tail's channel, its within-group awareness AUC
(against a pair-counting loop), the predicted drift ratios and the per-dial drift table."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from grpo_dial.analysis.channel import (
    channel_rows,
    channel_summary,
    drift_by_dial,
    predicted_ratio,
    run_drift,
    tail_awareness,
    within_group_auc,
    within_group_gap,
)
from grpo_dial.core.theory import expected_sigma, expected_sigma_power
from grpo_dial.data.tasks import ArithmeticTask, Problem

TASK = ArithmeticTask(operands=(2, 3), tail_checks=2)
P331 = Problem("arith-a", "17+305+9=", "331", "o3d3")
P9 = Problem("arith-b", "4+5=", "9", "o2d1")


def ref_auc(group, wrong, score) -> float:
    """Pairs of the same group counted one by one."""
    num = den = 0.0
    for i in range(len(group)):
        for j in range(len(group)):
            if group[i] == group[j] and wrong[i] and not wrong[j]:
                den += 1
                num += 1.0 if score[i] > score[j] else 0.5 if score[i] == score[j] else 0.0
    return num / den if den else float("nan")


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_within_group_auc_matches_pair_counting(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = 60
    group = rng.integers(0, 9, n)  # some groups singletons or one-class
    wrong = rng.random(n) < 0.4
    score = rng.integers(0, 4, n).astype(float)  # many ties
    assert within_group_auc(group, wrong, score) == pytest.approx(ref_auc(group, wrong, score))
    assert np.isnan(within_group_auc(group, np.zeros(n, bool), score))


def test_difficulty_does_not_pass_for_awareness() -> None:
    """Hard prompts: longer tails and more wrong answers, but within a prompt the tail is blind.
    The pooled AUC sees awareness, the within-group AUC and gap do not."""
    rng = np.random.default_rng(0)
    G, P = 8, 400
    hard = rng.random(P) < 0.5
    group = np.repeat(np.arange(P), G)
    wrong = rng.random(P * G) < np.repeat(np.where(hard, 0.8, 0.2), G)
    tail = rng.poisson(np.repeat(np.where(hard, 30.0, 10.0), G)).astype(float)
    u = stats.mannwhitneyu(tail[wrong], tail[~wrong]).statistic
    pooled = u / (wrong.sum() * (~wrong).sum())
    assert pooled > 0.65
    assert abs(within_group_auc(group, wrong, tail) - 0.5) < 0.03
    assert abs(within_group_gap(group, wrong, tail)) < 0.6
    aware = tail + 5 * wrong  # a tail that does see correctness
    assert within_group_auc(group, wrong, aware) > 0.7
    blind_gap = within_group_gap(group, wrong, tail)
    assert within_group_gap(group, wrong, aware) == pytest.approx(5 + blind_gap)


def test_channel_rows_and_summary_by_hand() -> None:
    texts = [
        "#331&305+9=314;314+17=331",  # correct, agrees, one check
        "#330&305+9=314;314+17=331&9+17=26;26+305=331",  # wrong, disagrees, continues
        "#330&305+9=314;314+17=330",  # wrong, copies its answer: blind
        "#331",  # correct, no tail
        "#9&5+4=9",  # other prompt: correct, agrees
        "#8&5+4=9",  # wrong, disagrees
    ]
    problems = [P331] * 4 + [P9] * 2
    rows = channel_rows(TASK, problems, texts, [True] * 6)
    assert rows["group"].tolist() == [0, 0, 0, 0, 1, 1]
    assert rows["reward"].tolist() == [1, 0, 0, 1, 1, 0]
    assert rows["disagree"].tolist() == [False, True, False, False, False, True]
    assert rows["first_disagree"].tolist() == [False, True, False, pd.NA, False, True]
    s = channel_summary(rows)
    assert s["sensitivity"] == pytest.approx(2 / 3)  # wrong with a check: 3, disagree: 2
    assert s["false_alarm"] == 0
    assert s["auc_disagree"] == pytest.approx((1 + 2 / 3) / 2)
    assert s["continue_after_disagree"] == 0.5 and s["continue_after_agree"] == 0
    assert s["checks_right_rate"] == pytest.approx(5 / 6)  # 6 valued checks, one wrong (330)
    # group 0: wrong tails 40, 21 vs correct 21, 0: pairs 40>21, 40>0, 21=21, 21>0
    assert s["auc_tail"] == pytest.approx((3.5 + 0.5) / 5)  # group 1: one tie (6 vs 6)
    assert s["auc_checks"] == pytest.approx((3.5 + 0.5) / 5)  # checks 2, 1 vs 1, 0; 1 vs 1


def test_tail_awareness_uses_first_round_groups_per_step() -> None:
    responses = pd.DataFrame(
        {
            "step": [0, 0, 0, 0, 1, 1, 1, 1, 1],
            "group": [0, 0, 1, 1, 0, 0, 1, 1, 0],
            "reward": [1, 0, 1, 0, 1, 0, 1, 0, 0],
            "redundant": [5, 5, 0, 0, 0, 9, 1, 4, 100],
            "resample_round": [0, 0, 0, 0, 0, 0, 0, 0, 1],  # the refill row is left out
        }
    )
    a = tail_awareness(responses)
    assert a["auc_tail"].tolist() == [0.5, 1.0]
    assert a["gap"].tolist() == [0.0, 6.0]
    assert a["n"].tolist() == [4, 4]


@pytest.mark.parametrize("G", [2, 8, 16])
def test_sigma_powers_match_the_closed_forms(G: int) -> None:
    p = np.linspace(0, 1, 21)
    assert np.allclose(expected_sigma_power(p, G, 1.0), expected_sigma(p, G))
    assert np.allclose(expected_sigma_power(p, G, 2.0), p * (1 - p) * (1 - 1 / G))


def test_predicted_ratios() -> None:
    p = np.array([0.1, 0.5, 0.7])
    r = np.mean(p * (1 - p) * (1 - 1 / 8)) / np.mean(expected_sigma(p, 8))
    assert predicted_ratio(p, 8, 1.0, "sequence") == pytest.approx((1.0, 1.0))
    assert predicted_ratio(p, 8, 0.0, "sequence") == pytest.approx((r, r))
    assert 0 < r < 1  # alpha 0 drifts slower than GRPO by E[sigma^2]/E[sigma]
    assert predicted_ratio(p, 8, 1.0, "constant") == (0.0, 0.0)
    assert predicted_ratio(p, 8, 0.0, "constant") == (0.0, 0.0)
    assert predicted_ratio(p, 8, 1.0, "token") == pytest.approx((0.0, 0.15))
    assert all(np.isnan(predicted_ratio(p, 8, 1.0, "lambda")))  # no closed form: measured only
    with pytest.raises(ValueError, match="length_norm='batch' is not valid"):
        predicted_ratio(p, 8, 1.0, "batch")


def test_drift_per_run_and_per_dial() -> None:
    awareness = pd.DataFrame(
        {"step": range(10), "gap": np.arange(10.0), "auc_tail": np.linspace(0.5, 0.6, 10)}
    )
    names = ["Rw0", "Rw1", "Rc0", "Rc1", "total", "within_incorrect_redundant"]
    names += ["within_correct_redundant", "within_incorrect_work"]
    terms = pd.DataFrame({"quantity": names, "value": [10.0, 13.0, 10.0, 9.0, 2, 1.5, -0.5, 1]})
    d = run_drift(awareness, terms, fraction=0.2)
    assert d["gap_drift"] == pytest.approx(8.5 - 0.5)
    assert d["wrong_tail_drift"] == 3 and d["correct_tail_drift"] == -1
    assert d["within_incorrect_redundant"] == 1.5 and d["total"] == 2
    runs = pd.DataFrame(
        {
            "dial": ["grpo"] * 3 + ["dr_grpo"] * 3,
            "seed": [0, 1, 2] * 2,
            "gap_drift": [2.0, 4.0, 6.0, 0.0, 1.0, -1.0],
            "wrong_tail_drift": [1.0] * 6,
            "correct_tail_drift": [0.0] * 6,
            "auc_tail_drift": [0.0] * 6,
        }
    )
    for q in ("total", "within_incorrect_redundant", "within_correct_redundant"):
        runs[q] = 0.0
    runs["within_incorrect_work"] = 0.0
    ratios = pd.DataFrame({"dial": ["grpo", "dr_grpo"], "ratio_lo": [1, 0], "ratio_hi": [1, 0]})
    t = drift_by_dial(runs, ratios).set_index(["quantity", "dial"])
    assert t.loc[("gap_drift", "grpo"), "mean"] == 4.0
    assert t.loc[("gap_drift", "grpo"), "predicted_hi"] == 4.0
    assert t.loc[("gap_drift", "dr_grpo"), "predicted_hi"] == 0.0
    assert t.loc[("gap_drift", "dr_grpo"), "measured_ratio"] == 0.0
    with pytest.raises(ValueError, match="reference dial 'dapo' has no runs"):
        drift_by_dial(runs, ratios, reference="dapo")

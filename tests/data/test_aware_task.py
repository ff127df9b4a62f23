"""Tests for the aware-tail task (data/tasks/aware.py): the forced core's statistics match the
options (counted, and checked against Bayes' rule by hand), right and wrong cores have equal
lengths, the verdict never reads the tail, and the blind variant's mode says nothing."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from grpo_dial.data.tasks import AwareTask, Problem, get_task, option_error
from grpo_dial.data.tasks.aware import ESTIMATE, FILLER, mode_of, wrong_answer

P331 = Problem("arith-x", "17+305+9=", "331", "o3d3")
FAST = settings(max_examples=80, deadline=None)


def draw(task: AwareTask, n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray, list[str]]:
    rng = np.random.default_rng(seed)
    cores = [task.response_prefix(P331, rng) for _ in range(n)]
    est = np.array([mode_of(c) == ESTIMATE for c in cores])
    right = np.array([task.verify(P331, c, True).correct for c in cores])
    return est, right, cores


def test_registered_and_options_checked():
    assert isinstance(get_task("aware", compute_accuracy=0.9), AwareTask)
    assert "compute_accuracy" in option_error("aware", {"compute_accuracy": 1.5})
    assert "tail_mean" in option_error("aware", {"tail_mean": -1})
    assert "operands" in option_error("aware", {"operands": [1, 9]})


def test_awareness_by_hand():
    a = AwareTask(estimate_rate=0.5, compute_accuracy=0.8, estimate_accuracy=0.2).awareness()
    # P(~|wrong) = .5*.8 / (.5*.8 + .5*.2) = .8, P(~|right) = .5*.2 / .5 = .2
    assert a.p == pytest.approx(0.5)
    assert (a.pi_wrong, a.pi_correct) == (pytest.approx(0.8), pytest.approx(0.2))
    assert a.awareness == pytest.approx(0.6) and a.symmetric
    blind = AwareTask(compute_accuracy=0.5, estimate_accuracy=0.5).awareness()
    assert blind.awareness == pytest.approx(0.0) and blind.symmetric
    skew = AwareTask(estimate_rate=0.3, compute_accuracy=0.9, estimate_accuracy=0.1).awareness()
    assert not skew.symmetric


@pytest.mark.parametrize("ac, ae", [(0.8, 0.2), (0.5, 0.5), (0.9, 0.4)])
def test_drawn_cores_match_the_options(ac, ae):
    task = AwareTask(estimate_rate=0.5, compute_accuracy=ac, estimate_accuracy=ae)
    est, right, cores = draw(task, 4000)
    for mask, acc in ((est, ae), (~est, ac)):
        k, n = int(right[mask].sum()), int(mask.sum())
        assert stats.binomtest(k, n, acc).pvalue > 1e-4
    assert stats.binomtest(int(est.sum()), len(est), 0.5).pvalue > 1e-4
    aw = task.awareness()
    measured = est[~right].mean() - est[right].mean()
    assert measured == pytest.approx(aw.awareness, abs=0.06)
    assert {len(c) for c in cores} == {4}  # right and wrong cores: equal lengths


def test_blind_mode_independent_of_correctness():
    est, right, _ = draw(AwareTask(compute_accuracy=0.5, estimate_accuracy=0.5), 4000, seed=3)
    table = [[int((est & right).sum()), int((est & ~right).sum())],
             [int((~est & right).sum()), int((~est & ~right).sum())]]  # fmt: skip
    assert stats.chi2_contingency(table).pvalue > 1e-4


@FAST
@given(st.integers(0, 10**6), st.integers(0, 2**32 - 1))
def test_wrong_answer_differs_same_length_no_leading_zero(value, seed):
    ref = str(value)
    out = wrong_answer(ref, np.random.default_rng(seed))
    assert out != ref and len(out) == len(ref) and out.isdigit()
    assert len(out) == 1 or out[0] != "0"
    assert sum(a != b for a, b in zip(out, ref, strict=True)) == 1


@FAST
@given(st.text(alphabet="0123456789+=~.", max_size=20), st.booleans())
def test_tail_never_read(tail, right):
    core = "=" + ("331" if right else "332")
    task = AwareTask()
    assert task.verify(P331, core + tail, True) == task.verify(P331, core, True)
    split = task.length_split(P331, core + tail)
    assert (split.work, split.redundant) == (4, len(tail))


def test_verdicts():
    task = AwareTask()
    assert task.verify(P331, "~331..", True).correct
    assert not task.verify(P331, "~331..", False).correct
    assert task.verify(P331, "~331..", False).truncated
    assert not task.verify(P331, "331...", True).correct  # no mode
    assert not task.verify(P331, "=33", True).correct  # cut core
    assert task.stratum(P331, "~331", "mode") == 1 and task.stratum(P331, "=331", "mode") == 0


def test_a_truncated_response_is_scored_by_its_core_when_asked():
    task = AwareTask(score_truncated=True)
    cut = task.verify(P331, "=331....", False)
    assert cut.correct and cut.truncated and cut.answer == "331"  # the cap decides nothing
    assert not task.verify(P331, "=332....", False).correct  # a wrong core stays wrong
    assert task.verify(P331, "=331..", True) == AwareTask().verify(P331, "=331..", True)
    assert not AwareTask().verify(P331, "=331....", False).correct  # the default: every task's rule
    with pytest.raises(ValueError, match="score_truncated must be true or false"):
        AwareTask(score_truncated=1)


def test_demonstration_tail_geometric_and_blind():
    task = AwareTask(tail_mean=3.0)
    rng = np.random.default_rng(1)
    demos = [task.demonstration(P331, "tail", rng) for _ in range(4000)]
    tails = np.array([len(d) - 4 for d in demos])
    assert all(set(d[4:]) <= {FILLER} for d in demos)
    assert tails.mean() == pytest.approx(3.0, rel=0.08)
    est = np.array([d[0] == ESTIMATE for d in demos])
    assert stats.mannwhitneyu(tails[est], tails[~est]).pvalue > 1e-4  # blind base tail
    with pytest.raises(ValueError, match="style"):
        task.demonstration(P331, "terse", rng)


def test_the_filler_writes_the_tail_and_joins_the_alphabet():
    default, spaced = AwareTask(), AwareTask(filler=" .")
    assert default.alphabet == "0123456789+=~."  # the tiny tokenizer's vocabulary, unchanged
    assert spaced.alphabet == "0123456789+=~ ."
    assert AwareTask(filler="~=").alphabet == "0123456789+=~"
    a = default.demonstration(P331, "tail", np.random.default_rng(5))
    b = spaced.demonstration(P331, "tail", np.random.default_rng(5))
    assert len(a) > 4 and b == a[:4] + " ." * (len(a) - 4)  # the same draws, T repeats
    core = spaced.read(P331, b)
    assert core.tail == " ." * (len(a) - 4) and spaced.verify(P331, b, True).answer == a[1:4]
    for bad in ("", "x" * 9, "\n", 3, "é"):
        with pytest.raises(ValueError, match=r"^filler must be 1-8 printable ASCII characters"):
            AwareTask(filler=bad)


def test_problems_are_arithmetics():
    from grpo_dial.data.tasks import ArithmeticTask

    a = AwareTask(operands=(2, 3), digits=(1, 3)).problems("train", 20, 0)
    b = ArithmeticTask(operands=(2, 3), digits=(1, 3)).problems("train", 20, 0)
    assert a == b

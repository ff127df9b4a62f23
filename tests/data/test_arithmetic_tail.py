"""Tests for the arithmetic task's checking tail (data/tasks/arithmetic_tail.py and the
tail_checks option): the tail never changes the verdict, demonstrations carry 0..K correct checks
blind to everything else, the length split counts the tail, and the channel reads disagreement."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from grpo_dial.data.tasks import ArithmeticTask, Problem, get_task
from grpo_dial.data.tasks.arithmetic_tail import channel, check_values, split_tail

FAST = settings(max_examples=80, deadline=None)
TAILED = ArithmeticTask(operands=(2, 3), digits=(1, 3), tail_checks=2)
PLAIN = ArithmeticTask(operands=(2, 3), digits=(1, 3))
P331 = Problem("arith-x", "17+305+9=", "331", "o3d3")


def ref_check(xs: list[int], j: int) -> str:
    """Check j by hand: operands rotated left j times (one at a time), partial sums by a loop."""
    order = list(xs)
    for _ in range(j):
        order.append(order.pop(0))
    acc, parts = order[0], []
    for x in order[1:]:
        parts.append(f"{acc}+{x}={acc + x}")
        acc += x
    return ";".join(parts)


def test_hand_example() -> None:
    rng = np.random.default_rng(3)
    seen = {TAILED.demonstration(P331, "worked", rng) for _ in range(60)}
    solution = "17+305=322;322+9=331;#331"
    assert seen == {
        solution,
        solution + "&305+9=314;314+17=331",
        solution + "&305+9=314;314+17=331&9+17=26;26+305=331",
    }
    assert TAILED.length_split(P331, solution + "&305+9=314;314+17=331").redundant == 21
    assert "&" in TAILED.alphabet and "&" not in PLAIN.alphabet


chars = st.sampled_from(list(TAILED.alphabet) + ["x", "-"])


@FAST
@given(st.text(chars, max_size=30), st.text(chars, max_size=30), st.booleans())
def test_tail_never_changes_the_verdict(solution: str, rest: str, finished: bool) -> None:
    solution = solution.replace("&", "")  # the solution is what comes before the first '&'
    tail = "&" + rest
    with_tail = TAILED.verify(P331, solution + tail, finished)
    assert with_tail == TAILED.verify(P331, solution, finished)
    assert with_tail == PLAIN.verify(P331, solution, finished)  # the base rule on the solution
    split = TAILED.length_split(P331, solution + tail)
    assert split.work + split.redundant == len(solution + tail)
    assert split.redundant == PLAIN.length_split(P331, solution).redundant + len(tail)
    # without the option the task keeps its original rule: text after the answer is no answer
    assert not PLAIN.verify(P331, "#331" + tail, True).correct
    assert TAILED.verify(P331, "#331" + tail, True).correct


@pytest.mark.parametrize("seed", [0, 1])
def test_demonstrations_carry_uniform_blind_correct_checks(seed: int) -> None:
    rng = np.random.default_rng(seed)
    counts = np.zeros((len(TAILED.styles), 3), dtype=int)  # (styles, 0..K checks)
    for problem in TAILED.problems("train", 300, seed):
        xs = [int(x) for x in problem.prompt[:-1].split("+")]
        for s, style in enumerate(TAILED.styles):
            demo = TAILED.demonstration(problem, style, rng)
            solution, tail = split_tail(demo)
            assert TAILED.verify(problem, demo, True).correct
            assert solution == PLAIN.demonstration(problem, style, np.random.default_rng(0)) or (
                style == "rechecked"  # its re-checks are random; its answer and work are not
            )
            checks = tail.split("&")[1:]
            assert checks == [ref_check(xs, j) for j in range(1, len(checks) + 1)]
            assert all(v == problem.reference for v in check_values(tail))
            assert not channel(demo, problem.reference, problem.reference).disagree
            counts[s, len(checks)] += 1
    assert stats.chisquare(counts.sum(0)).pvalue > 1e-3  # 0, 1, 2 checks equally often
    assert stats.chi2_contingency(counts).pvalue > 1e-3  # and the same mix in every style


def test_plain_task_is_unchanged_by_the_option() -> None:
    """tail_checks 0 draws nothing extra: the corpus is the original task's, bit for bit."""
    a = ArithmeticTask().corpus(200, 0)
    b = ArithmeticTask(tail_checks=0).corpus(200, 0)
    assert a == b and not any("&" in d for _, d in a)


@pytest.mark.parametrize(
    ("response", "answer", "expected"),
    [
        ("17+305=322;322+9=331;#331", "331", (0, 0, 0, False, 0)),
        ("#331&305+9=314;314+17=331", "331", (1, 21, 1, False, 1)),
        ("#330&305+9=314;314+17=331", "330", (1, 21, 1, True, 1)),  # a wrong answer, seen
        ("#330&305+9=314;314+17=330", "330", (1, 21, 1, False, 0)),  # the check copies it
        ("#331&305+9=314;314+17=", "331", (1, 18, 0, False, 0)),  # no value: nothing to compare
        ("#331&&9+17=26;26+305=331&x=33", "331", (3, 25, 2, True, 1)),
        ("3#&17+305=322", None, (1, 11, 1, True, 0)),  # no stated answer: any value disagrees
    ],
)
def test_channel_by_hand(response: str, answer: str | None, expected: tuple) -> None:
    assert TAILED.verify(P331, response, True).answer == answer
    assert tuple(channel(response, answer, "331")) == expected


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"tail_checks": -1}, "tail_checks must be an integer >= 0"),
        ({"tail_checks": 1.5}, "tail_checks must be an integer >= 0"),
        ({"tail_checks": True}, "tail_checks must be an integer >= 0"),
        ({"tail_checks": 9}, "tail_checks must be <= 8"),
    ],
)
def test_bad_tail_knobs_fail_in_one_line(kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message) as err:
        get_task("arithmetic", **kwargs)
    assert "\n" not in str(err.value)


def test_a_tail_on_a_task_without_one_fails_in_one_line() -> None:
    with pytest.raises(ValueError, match="unknown option 'tail_checks' for task 'math'") as err:
        get_task("math", tail_checks=2)
    assert "\n" not in str(err.value)

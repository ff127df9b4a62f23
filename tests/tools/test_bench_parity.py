"""The fixed workload's task: reward 1 iff the response holds an odd number of digits."""

from __future__ import annotations

from grpo_dial.data.tasks.arithmetic import ArithmeticTask
from grpo_dial.tools.bench.parity import ParityTask


def test_reward_is_the_parity_of_the_digit_count() -> None:
    base = ArithmeticTask()
    task = ParityTask(base)
    problem = base.problems("train", 1, 0)[0]
    assert task.verify(problem, "a1b", True).correct
    assert not task.verify(problem, "12", True).correct
    assert not task.verify(problem, "", True).correct
    assert task.verify(problem, "123", True).correct


def test_unfinished_responses_are_truncated_but_still_scored() -> None:
    base = ArithmeticTask()
    problem = base.problems("train", 1, 0)[0]
    verdict = ParityTask(base).verify(problem, "7", False)
    assert verdict.truncated and verdict.correct
    assert ParityTask(base).length_split(problem, "7") is None


def test_everything_else_is_the_base_task() -> None:
    base = ArithmeticTask()
    task = ParityTask(base)
    assert task.alphabet == base.alphabet
    assert [p.prompt for p in task.problems("train", 3, 1)] == [
        p.prompt for p in base.problems("train", 3, 1)
    ]

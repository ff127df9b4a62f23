"""Tasks by name: `TASKS` maps a config's `task:` name to its class; `get_task` builds one.

Every task implements `base.Task`; options are the class's constructor arguments, so a YAML
`task: {name: arithmetic, operands: [2, 4]}` becomes `get_task("arithmetic", operands=[2, 4])`.
Registered: `arithmetic` (procedural sums, tasks/arithmetic.py) and `math` (GSM8K / MATH-500 /
Big-Math checked by math-verify, tasks/math.py).
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from types import MappingProxyType

from grpo_dial.data.tasks.arithmetic import ArithmeticTask
from grpo_dial.data.tasks.base import SPLITS, LengthSplit, Problem, Task, Verdict
from grpo_dial.data.tasks.math import MathTask

TASKS: Mapping[str, type] = MappingProxyType(
    {ArithmeticTask.name: ArithmeticTask, MathTask.name: MathTask}
)

__all__ = ["SPLITS", "TASKS", "ArithmeticTask", "LengthSplit", "MathTask", "Problem", "Task"]
__all__ += ["Verdict"]
__all__ += ["get_task"]


def get_task(name: str, **options: object) -> Task:
    """The task registered as `name`, built with `options`; unknown names or options raise."""
    if not isinstance(name, str) or name not in TASKS:
        raise ValueError(f"unknown task {name!r}; valid tasks: {', '.join(sorted(TASKS))}")
    cls = TASKS[name]
    valid = [p for p in inspect.signature(cls).parameters if p != "self"]
    for key in options:
        if key not in valid:
            raise ValueError(
                f"unknown option {key!r} for task {name!r}; valid options: {', '.join(valid)}"
            )
    return cls(**options)

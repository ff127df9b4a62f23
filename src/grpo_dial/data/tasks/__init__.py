"""Tasks by name: `TASKS` maps a config's `task:` name to its class; `get_task` builds one.

Every task implements `base.Task`; its options are its own fields (`base.task_options`), so a
YAML `task: {name: arithmetic, options: {operands: [2, 4]}}` becomes
`get_task("arithmetic", operands=[2, 4])`. `option_error` gives the workflow the same check as
one line before any job runs (building a task reads no data: the math pools load on first use).
Registered: `arithmetic` (procedural sums, tasks/arithmetic.py) and `math` (GSM8K / MATH-500 /
Big-Math checked by math-verify, tasks/math.py) and `aware` (a forced mode + answer core, then a
free tail: the length bias where the tail can know it is wrong, tasks/aware.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from grpo_dial.data.tasks.arithmetic import ArithmeticTask
from grpo_dial.data.tasks.aware import AwareTask
from grpo_dial.data.tasks.base import (
    GENERIC_STRATA,
    SPLITS,
    LengthSplit,
    Problem,
    Task,
    TaskOption,
    Verdict,
    provided_strata,
    stratum_error,
    task_options,
)
from grpo_dial.data.tasks.math import MathTask

TASKS: Mapping[str, type] = MappingProxyType(
    {ArithmeticTask.name: ArithmeticTask, MathTask.name: MathTask, AwareTask.name: AwareTask}
)

__all__ = ["SPLITS", "TASKS", "ArithmeticTask", "AwareTask", "LengthSplit", "MathTask", "Problem"]
__all__ += ["Task"]
__all__ += ["TaskOption", "Verdict"]
__all__ += ["get_task", "option_error", "task_from_spec", "task_options"]
__all__ += ["GENERIC_STRATA", "provided_strata", "stratum_error"]


def get_task(name: str, **options: object) -> Task:
    """The task registered as `name`, built with `options`; unknown names or options raise."""
    if not isinstance(name, str) or name not in TASKS:
        raise ValueError(f"unknown task {name!r}; valid tasks: {', '.join(sorted(TASKS))}")
    declared = task_options(TASKS[name])
    valid = [option.name for option in declared]
    for key in options:
        if key not in valid:
            raise ValueError(
                f"unknown option {key!r} for task {name!r}; valid options: {', '.join(valid)}"
            )
    if missing := [o.name for o in declared if o.required and o.name not in options]:
        raise ValueError(f"task {name!r} needs option(s): {', '.join(missing)}")
    return TASKS[name](**options)


def task_from_spec(spec: Mapping) -> Task:
    """The task of a config's `task:` section ({name, options}), the form every job receives."""
    return get_task(spec["name"], **(spec.get("options") or {}))


def option_error(name: object, options: object) -> str | None:
    """None when `task: {name, options}` builds, else one line naming the bad name or option."""
    if not isinstance(options, Mapping):
        return f"config error at 'task.options': must be a mapping, got {options!r}"
    try:
        get_task(name, **options)  # type: ignore[arg-type]
    except (ValueError, TypeError) as error:
        text = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        where = "task.name" if isinstance(error, ValueError) and "unknown task" in text else None
        bad = [k for k in options if f"option {k!r}" in text or text.startswith(f"{k} ")]
        where = where or (f"task.options.{bad[0]}" if bad else "task.options")
        return f"config error at '{where}': {text}"
    return None

"""What a task is: prompts with references, a verifier, and optionally a length split.

A task is any object with the attributes and methods of `Task`. The trainer, the warm start and
the pass-rate estimator only talk to this interface, so a real-data task (GSM8K, MATH with
math-verify) plugs in unchanged next to the procedural arithmetic task.

Conventions shared by every task:
- A response is the text the policy generates after the prompt, without the end-of-sequence
  token; `finished` says whether the policy emitted that token before the length limit.
- An unfinished (truncated) response is wrong: `verify` returns correct=False, truncated=True.
- Responses are never executed or evaluated as code; parsing is plain string handling.
"""

from __future__ import annotations

import dataclasses
import inspect
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import numpy as np

SPLITS = ("train", "eval", "heldout")
# Stratum keys of the dial's stratified normalization that every task has (the trainer derives
# them from the batch); a task adds its own with a `stratum_keys` tuple and a
# `stratum(problem, response, key) -> int` method (see `stratum_error`).
GENERIC_STRATA = ("truncated", "length_bucket")


@dataclass(frozen=True)
class Problem:
    """One prompt. `prompt_id` is stable across runs for the same task options and seed."""

    prompt_id: str
    prompt: str
    reference: str
    difficulty: str


@dataclass(frozen=True)
class Verdict:
    """The verifier's answer: reward 1 when `correct`, else 0; truncated responses are wrong."""

    correct: bool
    truncated: bool
    answer: str | None


@dataclass(frozen=True)
class LengthSplit:
    """A response's length in characters, split into necessary work and redundant re-checking."""

    work: int
    redundant: int


@runtime_checkable
class Task(Protocol):
    """The interface every task implements."""

    name: str
    styles: tuple[str, ...]  # demonstration styles of the warm-start corpus
    alphabet: str  # every character a prompt or a response can contain

    def problems(self, split: str, n: int, seed: int) -> list[Problem]:
        """n problems of a split in SPLITS; splits never share a prompt."""
        ...

    def demonstration(self, problem: Problem, style: str, rng: np.random.Generator) -> str:
        """A correct response to `problem` in `style`, for supervised warm start."""
        ...

    def verify(self, problem: Problem, response: str, finished: bool) -> Verdict:
        """Exact check of the response's final answer against the reference."""
        ...

    def length_split(self, problem: Problem, response: str) -> LengthSplit | None:
        """Work / redundant characters of a response, or None where the task cannot tell."""
        ...


@dataclass(frozen=True)
class TaskOption:
    """One option a task takes (a YAML `task.options` key): its default and its help text."""

    name: str
    required: bool
    default: object
    help: str


def task_options(cls: type) -> tuple[TaskOption, ...]:
    """The options of a task class, declared by the class itself: the fields of a dataclass task
    (help from each field's `help` metadata), else its constructor's parameters. Derived, not
    listed, so an option added to a task is validated without touching anything else."""
    if dataclasses.is_dataclass(cls):
        return tuple(
            TaskOption(
                f.name,
                f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING,
                None if f.default is dataclasses.MISSING else f.default,
                str(f.metadata.get("help", "")),
            )
            for f in dataclasses.fields(cls)
            if f.init
        )
    params = list(inspect.signature(cls.__init__).parameters.values())[1:]  # without self
    return tuple(
        TaskOption(
            p.name,
            p.default is inspect.Parameter.empty,
            None if p.default is inspect.Parameter.empty else p.default,
            "",
        )
        for p in params
        if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
    )


def provided_strata(task: object) -> tuple[str, ...]:
    """Every stratum key `task` can give a response: GENERIC_STRATA and its own `stratum_keys`."""
    return GENERIC_STRATA + tuple(getattr(task, "stratum_keys", ()))


def stratum_error(task: object, key: str | None) -> str | None:
    """None when the dial's `strata` key is one the task provides, else why, in one line."""
    if key is None or key in provided_strata(task):
        return None
    name = getattr(task, "name", type(task).__name__)
    return f"stratum key {key!r} is not provided by task {name!r}; valid: " + ", ".join(
        provided_strata(task)
    )

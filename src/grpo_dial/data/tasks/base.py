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

from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import numpy as np

SPLITS = ("train", "eval", "heldout")


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

"""The fixed workload's task: the arithmetic prompts, reward 1 iff the response holds an odd
number of digits.

A random response is right half the time and a policy cannot learn it in a few steps, so groups
stay informative and every row keeps a gradient on both sides (the arithmetic verifier scores
every unfinished response 0, and the fixed workload finishes none: all groups would be silent).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ParityTask:
    """`base` (an arithmetic task) with the parity verifier; everything else is the base's."""

    base: object

    def verify(self, problem, response: str, finished: bool):
        from grpo_dial.data.tasks.base import Verdict

        odd = sum(c.isdigit() for c in response) % 2 == 1
        return Verdict(correct=odd, truncated=not finished, answer=None)

    def length_split(self, problem, response: str):
        return None

    def __getattr__(self, name: str):
        return getattr(self.base, name)

"""A tiny task for the policy tests: copy a 2-digit number ("37=" -> "37").

Style "terse" answers "37"; style "check" answers "37;37" (the copy after ";" is redundant
re-checking). The first field is the answer. Splits partition 00..99 by the last digit.
"""

from __future__ import annotations

import numpy as np

from grpo_dial.data.tasks.base import SPLITS, LengthSplit, Problem, Verdict

SPLIT_DIGITS = {"train": range(0, 7), "eval": range(7, 9), "heldout": range(9, 10)}


class CopyTask:
    name = "copy"
    styles = ("terse", "check")
    alphabet = "0123456789=;"

    def problems(self, split: str, n: int, seed: int) -> list[Problem]:
        if split not in SPLITS:
            raise ValueError(f"unknown split {split!r}")
        pool = [x for x in range(100) if x % 10 in SPLIT_DIGITS[split]]
        rng = np.random.default_rng(seed)
        picks = rng.choice(pool, size=n, replace=n > len(pool))
        return [
            Problem(f"copy-{x:02d}", f"{x:02d}=", f"{x:02d}", "two-digit" if x >= 10 else "one")
            for x in picks.tolist()
        ]

    def demonstration(self, problem: Problem, style: str, rng: np.random.Generator) -> str:
        if style == "terse":
            return problem.reference
        return f"{problem.reference};{problem.reference}"

    def verify(self, problem: Problem, response: str, finished: bool) -> Verdict:
        answer = response.split(";")[0]
        return Verdict(finished and answer == problem.reference, not finished, answer)

    def length_split(self, problem: Problem, response: str) -> LengthSplit | None:
        work = len(response.split(";")[0])
        return LengthSplit(work, len(response) - work)

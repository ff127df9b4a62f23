"""The aware-tail task: a tail that can know it is wrong, by construction.

A response is  mode  answer  tail:
    mode    "=" (compute) or "~" (estimate), drawn by the task: "~" with probability estimate_rate
    answer  len(reference) digits: the sum with probability compute_accuracy after "=" and
            estimate_accuracy after "~", else the sum with one digit changed (same length, no
            leading zero), so right and wrong cores have exactly equal lengths
    tail    any characters after the answer (the demonstrations write the filler, "." by default,
            T times, T geometric with mean tail_mean, independent of mode and correctness); never
            read by the verdict. A subword tokenizer may merge repeated fillers into one token
            ("....." is one SmolLM2 token): pick a filler it writes as one token per repeat
            (" ." for SmolLM2), so the demonstrations' T is the tail's length in tokens.
The core (mode + answer, 1 + len(reference) characters) is not the policy's choice: the trainer
asks `response_prefix` for it, forces it into the response (policy/rollout/forced.py) and masks
its tokens out of the policy gradient, while they still count in |o|. The mode therefore keeps
its probability during RL, and the only thing the policy chooses is the tail's length, which it
may condition on the mode it sees in its own context.

Awareness (core/length_drift.py's model). Per response, correctness r and mode are drawn
independently of everything else, so within a group a wrong response is in estimate mode with
probability pi_0 = P(~ | wrong) and a correct one with pi_1 = P(~ | correct); the pass rate is
p = m a_e + (1 - m) a_c (m = estimate_rate). With m = 1/2 and a_c = 1 - a_e, pi_0 + pi_1 = 1 and
the closed form's awareness is a = pi_0 - pi_1 = 1 - 2 a_e (the defaults: a_e 0.2, a = 0.6,
p = 0.5). Blind: a_c = a_e (the mode says nothing about correctness, a = 0; the closed form's
drift is exactly 0 under every normalizer).

Verification: correct iff finished, the mode is "=" or "~" and the len(reference) characters
after it equal the reference; nothing after them is read. A response cut at the length limit is
wrong (every task's rule), unless score_truncated: then the forced core alone decides, finished or
not (the verdict still flags it truncated). The rule matters here: the core is forced, so a cut
response holds its answer, and scoring it wrong makes the tail's length decide correctness, and
decide it by mode: a cut "=" response (right 80 %) loses more reward than a cut "~" one (right
20 %), a push on the compute tail alone that no normalizer's closed form contains.
Length split: work = the core's characters, redundant = the tail's.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import ClassVar, NamedTuple

import numpy as np

from grpo_dial.data.tasks.arithmetic import ArithmeticTask
from grpo_dial.data.tasks.base import LengthSplit, Problem, Verdict

COMPUTE, ESTIMATE = "=", "~"
MODES = (COMPUTE, ESTIMATE)
FILLER = "."


def _opt(default: object, text: str) -> object:
    return field(default=default, metadata={"help": text})


class Awareness(NamedTuple):
    """What the task's numbers say: pass rate p, P(~ | wrong), P(~ | correct), and the closed
    form's awareness a = pi_0 - pi_1 (exact in its model when pi_0 + pi_1 = 1)."""

    p: float
    pi_wrong: float
    pi_correct: float
    awareness: float
    symmetric: bool


class Core(NamedTuple):
    """A response's forced core as the task reads it back."""

    mode: str | None  # "=" / "~", None when the response does not open with one
    answer: str
    tail: str


@dataclass(frozen=True)
class AwareTask:
    """Arithmetic prompts whose response core (mode + answer) the task draws; see the docstring."""

    name: ClassVar[str] = "aware"
    styles: ClassVar[tuple[str, ...]] = ("tail",)

    operands: tuple[int, int] = _opt((2, 3), "[min, max] operands of the arithmetic prompts.")
    digits: tuple[int, int] = _opt((1, 3), "[min, max] digits of the arithmetic prompts' levels.")
    estimate_rate: float = _opt(
        0.5, "P(mode '~'), held fixed during RL (the task draws the mode, the policy cannot)."
    )
    compute_accuracy: float = _opt(0.8, "P(answer right | mode '=').")
    estimate_accuracy: float = _opt(
        0.2, "P(answer right | mode '~'); equal to compute_accuracy = the blind variant."
    )
    tail_mean: float = _opt(
        3.0, "Mean of the demonstrations' geometric tail length T (characters after the answer)."
    )
    filler: str = _opt(
        FILLER, "The text the demonstrations repeat T times after the answer (1-8 printable ASCII "
        "characters); one token per repeat under the policy's tokenizer keeps T in tokens."
    )
    score_truncated: bool = _opt(
        False,
        "Score a response cut at max_new_tokens by its forced core (true) instead of as wrong "
        "(every task's rule): the generation cap then cannot decide correctness.",
    )

    def __post_init__(self) -> None:
        for name in ("estimate_rate", "compute_accuracy", "estimate_accuracy"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int | float) or not 0 <= v <= 1:
                raise ValueError(f"{name} must be a number in [0, 1], got {v!r}")
        if not isinstance(self.score_truncated, bool):
            raise ValueError(f"score_truncated must be true or false, got {self.score_truncated!r}")
        f = self.filler
        if not isinstance(f, str) or not 1 <= len(f) <= 8 or not (f.isascii() and f.isprintable()):
            raise ValueError(f"filler must be 1-8 printable ASCII characters, got {f!r}")
        t = self.tail_mean
        if isinstance(t, bool) or not isinstance(t, int | float) or not 0 <= t <= 64:
            raise ValueError(f"tail_mean must be a number in [0, 64], got {t!r}")
        # validates operands / digits with arithmetic's own one-line errors
        object.__setattr__(
            self, "_sums", ArithmeticTask(operands=self.operands, digits=self.digits)
        )
        object.__setattr__(self, "operands", self._sums.operands)
        object.__setattr__(self, "digits", self._sums.digits)

    @property
    def alphabet(self) -> str:
        """Every character a prompt or a response can contain: digits, "+", the modes, the
        filler's characters."""
        return "0123456789+=" + ESTIMATE + "".join(c for c in dict.fromkeys(self.filler)
                                                     if c not in "0123456789+=" + ESTIMATE)

    # ------------------------------------------------------------------------- the numbers

    def awareness(self) -> Awareness:
        """p, pi_0 = P(~ | wrong), pi_1 = P(~ | correct) and a = pi_0 - pi_1 from the options."""
        m, ac, ae = self.estimate_rate, self.compute_accuracy, self.estimate_accuracy
        p = m * ae + (1 - m) * ac
        wrong, right = m * (1 - ae) + (1 - m) * (1 - ac), p
        pi0 = m * (1 - ae) / wrong if wrong > 0 else math.nan
        pi1 = m * ae / right if right > 0 else math.nan
        return Awareness(p, pi0, pi1, pi0 - pi1, bool(abs(pi0 + pi1 - 1) < 1e-12))

    # ------------------------------------------------------------------------- problems

    def problems(self, split: str, n: int, seed: int) -> list[Problem]:
        """The arithmetic task's problems (same prompts, splits and ids)."""
        return self._sums.problems(split, n, seed)

    def capacity(self, split: str) -> int | None:
        return self._sums.capacity(split)

    def corpus(
        self, n: int, seed: int, style_weights: Mapping[str, float] | None = None
    ) -> list[tuple[Problem, str]]:
        """n (train problem, demonstration) pairs, problems drawn with replacement as the
        arithmetic task's corpus (its small levels hold only dozens of train prompts)."""
        unknown = [s for s in style_weights or {} if s not in self.styles]
        if unknown:
            raise ValueError(f"unknown style(s) {', '.join(unknown)}; valid: tail")
        drawn = self._sums.corpus(n, seed, {"terse": 1.0})
        rng = np.random.default_rng([seed, 0x61776172])  # "awar": apart from arithmetic's draws
        return [(p, self.demonstration(p, "tail", rng)) for p, _ in drawn]

    # ------------------------------------------------------------------------- responses

    def response_prefix(self, problem: Problem, rng: np.random.Generator) -> str:
        """The forced core of one response: mode, then the answer right with the mode's accuracy."""
        ref = problem.reference
        if not (ref.isascii() and ref.isdigit()):
            raise ValueError(f"reference {ref!r} of {problem.prompt!r} is not a decimal number")
        mode = ESTIMATE if rng.random() < self.estimate_rate else COMPUTE
        accuracy = self.estimate_accuracy if mode == ESTIMATE else self.compute_accuracy
        if rng.random() < accuracy:
            return mode + ref
        return mode + wrong_answer(ref, rng)

    def demonstration(self, problem: Problem, style: str, rng: np.random.Generator) -> str:
        """A core drawn as during RL followed by a blind tail of T ~ Geometric(mean tail_mean)
        fillers: the base policy's tail length ignores the mode (awareness is RL's to use)."""
        if style not in self.styles:
            raise ValueError(
                f"style={style!r} is not valid; choose one of {', '.join(self.styles)}"
            )
        q = self.tail_mean / (1 + self.tail_mean)  # continue probability: E[T] = q / (1 - q)
        t = int(rng.geometric(1 - q)) - 1 if q > 0 else 0  # numpy's geometric starts at 1
        return self.response_prefix(problem, rng) + self.filler * t

    def read(self, problem: Problem, response: str) -> Core:
        """Mode, answer and tail of a response (by position: the core has 1 + len(ref) chars)."""
        if not isinstance(response, str):
            raise ValueError(f"response must be a str, got {type(response).__name__}")
        width = len(problem.reference)
        mode = response[:1] if response[:1] in MODES else None
        return Core(mode, response[1 : 1 + width], response[1 + width :])

    def verify(self, problem: Problem, response: str, finished: bool) -> Verdict:
        """correct iff finished (or score_truncated), a mode opens it and the answer equals the
        reference; the tail is never read."""
        core = self.read(problem, response)
        if not finished and not self.score_truncated:
            return Verdict(correct=False, truncated=True, answer=None)
        if core.mode is None or not (core.answer.isascii() and core.answer.isdigit()):
            return Verdict(correct=False, truncated=not finished, answer=None)
        return Verdict(core.answer == problem.reference, not finished, core.answer)

    def length_split(self, problem: Problem, response: str) -> LengthSplit:
        """work = the core's characters, redundant = the tail's."""
        tail = len(self.read(problem, response).tail)
        return LengthSplit(work=len(response) - tail, redundant=tail)

    @property
    def stratum_keys(self) -> tuple[str, ...]:
        """'mode': 0 compute, 1 estimate (stratified normalization by what the tail can see)."""
        return ("mode",)

    def stratum(self, problem: Problem, response: str, key: str) -> int:
        if key not in self.stratum_keys:
            raise ValueError(f"task {self.name!r} provides no stratum {key!r}")
        return int(self.read(problem, response).mode == ESTIMATE)


def wrong_answer(reference: str, rng: np.random.Generator) -> str:
    """reference with one uniformly chosen digit replaced by another digit, same length; the
    first digit of a multi-digit number never becomes 0."""
    i = int(rng.integers(len(reference)))
    low = 1 if i == 0 and len(reference) > 1 else 0
    choices = [d for d in "0123456789"[low:] if d != reference[i]]
    return reference[:i] + choices[int(rng.integers(len(choices)))] + reference[i + 1 :]


def mode_of(response: str) -> str | None:
    """The mode a response opens with, None when it opens with neither."""
    return response[:1] if response[:1] in MODES else None


def options_awareness(options: Mapping[str, object]) -> Awareness:
    """Awareness of a config's task options (the task's defaults filled in)."""
    return AwareTask(**options).awareness()  # type: ignore[arg-type]

"""Procedural arithmetic: sums of integers with a difficulty knob and a free-length solution format.

Problems and splits (tasks/arithmetic_problems.py): a level "o{o}d{d}" is a sum of o operands of
up to d digits; the grid is every (o, d) with o in `operands` and d in `digits` (inclusive
ranges); `mix` weights the levels (default uniform). Prompt "17+305+9=", reference "331",
prompt_id "arith-" + first 16 hex of sha1(prompt). A prompt's split (train / eval / heldout) is
a function of its text alone, so the splits never share a prompt. A split's n problems are
distinct (an evaluation pool has unique ids); level counts are n * weight rounded by largest
remainder, so small levels run out: asking for more than a level's split holds is a ValueError
(`capacity` gives the safe n). `corpus` draws with replacement instead.

Response grammar (no whitespace: char-level tokenizers that split or strip spaces stay lossless):
    response = { segment ";" } "#" answer          answer: the sum's decimal digits
    step     = a "+" b "=" c                       a running partial sum: c = a + b
    recheck  = "chk" step                          repeats a step's verification
Styles: terse "#331"; worked "17+305=322;322+9=331;#331" (o - 1 steps); rechecked: worked plus
1-2 rechecks of random steps, each right after the step it repeats, "17+305=322;322+9=331;
chk322+9=331;#331". Segments before the answer are never checked, so a response can grow or
shrink (terse <-> worked <-> any number of rechecks) without changing its correctness.

Verification: reward 1 iff the response is finished and the text after its LAST '#' is non-empty
ASCII digits equal to the reference string exactly (no sign, no leading zeros, nothing after).
Only the last MAX_ANSWER_CHARS + 1 characters are searched for '#', so work is bounded for any
input; a longer "answer" counts as no answer.

Length split: cut at ';', each ';' belonging to the segment before it. A segment is redundant
if it starts with "chk" (a recheck by its own declaration, right or wrong, never feeds the
answer) or is a well-formed step seen more often than the problem's own worked solution holds it
(once; twice for "5+0=5" in 5+0+0=). Every other character, including unparseable text, is
work: padding is only claimed where the grammar proves it.
work + redundant = len(response).

Checking tail (tail_checks = K > 0; tasks/arithmetic_tail.py): after the answer, "&"-separated
re-computations of the sum in other operand orders, J ~ Uniform{0..K} per demonstration. The
verdict reads only the text before the first "&", so no tail changes it; the tail's characters
count as redundant in the length split; "&" joins the alphabet only when K > 0.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import ClassVar

import numpy as np

from grpo_dial.core.checks import check_choice, check_int
from grpo_dial.core.checks import opt as _opt
from grpo_dial.data.tasks.arithmetic_problems import (
    Level,
    distinct,
    enumerable,
    in_split,
    level_label,
    level_pool,
    make_problem,
    operands_of,
    stratify,
    take,
    worked_steps,
)
from grpo_dial.data.tasks.arithmetic_tail import MAX_TAIL_CHECKS, TAIL, check_lines, split_tail
from grpo_dial.data.tasks.base import SPLITS, LengthSplit, Problem, Verdict

RECHECK = "chk"
MAX_ANSWER_CHARS = 32  # a reference has at most 7 digits (6 operands of 6 digits)
MAX_OPERANDS = 6
MAX_DIGITS = 6  # prompts stay <= 6 * 6 + 6 = 42 characters; the default grid's <= 16
DEFAULT_STYLE_WEIGHTS = MappingProxyType({"terse": 0.4, "worked": 0.4, "rechecked": 0.2})
_SALT = 0x61726974  # "arit": keeps these RNG streams apart from other uses of the same seed
_STEP = re.compile(r"[0-9]+\+[0-9]+=[0-9]+")




@dataclass(frozen=True)
class ArithmeticTask:
    """Sums of `operands` numbers of up to `digits` digits; see the module docstring."""

    name: ClassVar[str] = "arithmetic"
    styles: ClassVar[tuple[str, ...]] = ("terse", "worked", "rechecked")
    base_alphabet: ClassVar[str] = "0123456789+=;#" + RECHECK

    operands: tuple[int, int] = _opt(
        (2, 4),
        f"[min, max] number of operands (2..{MAX_OPERANDS}), or one integer. More operands mean "
        "more carries and longer worked solutions; 2 one-digit operands is nearly always solved "
        "by a warm-started char-level policy, 4 three-digit operands rarely.",
    )
    digits: tuple[int, int] = _opt(
        (1, 3),
        f"[min, max] of the levels' maximum digits per operand (1..{MAX_DIGITS}), or one integer.",
    )
    mix: Mapping[str, float] | tuple[tuple[str, float], ...] | None = _opt(
        None,
        "Weights over difficulty labels 'o{operands}d{digits}' of the grid, e.g. {o2d1: 1, o4d3: "
        "2}; unlisted levels get 0. None = uniform over the grid. Shift weight toward the levels "
        "whose pass rates sit between 0 and 1 to keep groups informative. Stored as sorted pairs.",
    )

    tail_checks: int = _opt(
        0,
        f"Most re-computation checks after the answer in a demonstration (0..{MAX_TAIL_CHECKS}; "
        "0 = no tail). Each demonstration draws 0..tail_checks uniformly, blind "
        "to correctness; the verdict never reads the tail, so it is the free-length channel on "
        "which the 1/|o| length bias can act. Raise max_new_tokens to fit it.",
    )

    def __post_init__(self) -> None:
        check_int("tail_checks", self.tail_checks, 0)
        if self.tail_checks > MAX_TAIL_CHECKS:
            raise ValueError(f"tail_checks must be <= {MAX_TAIL_CHECKS}, got {self.tail_checks}")
        object.__setattr__(self, "operands", _range("operands", self.operands, 2, MAX_OPERANDS))
        object.__setattr__(self, "digits", _range("digits", self.digits, 1, MAX_DIGITS))
        if self.mix is not None:
            object.__setattr__(self, "mix", _mix(self.mix, self._grid()))

    def _grid(self) -> list[tuple[str, int, int]]:
        return [
            (level_label(o, d), o, d)
            for o in range(self.operands[0], self.operands[1] + 1)
            for d in range(self.digits[0], self.digits[1] + 1)
        ]

    @property
    def alphabet(self) -> str:
        """Every character of a prompt or demonstration; the tail's separator only with a tail."""
        return self.base_alphabet + (TAIL if self.tail_checks else "")

    @property
    def levels(self) -> tuple[Level, ...]:
        """The grid in order (operands, then digits) with weights summing to 1."""
        grid = self._grid()
        raw = dict(self.mix) if self.mix is not None else {lab: 1.0 for lab, _, _ in grid}
        total = math.fsum(raw.values())
        return tuple(Level(lab, o, d, raw.get(lab, 0.0) / total) for lab, o, d in grid)

    # ----------------------------------------------------------------------------- problems

    def problems(self, split: str, n: int, seed: int) -> list[Problem]:
        """n distinct problems of `split`, n_L = n * w_L by largest remainder, in shuffled order."""
        check_choice("split", split, SPLITS)
        check_int("n", n, 0)
        check_int("seed", seed, 0)
        s = SPLITS.index(split)
        levels = self.levels
        rng = np.random.default_rng([_SALT, seed, s])
        counts = stratify(n, np.array([lv.weight for lv in levels]), rng)  # (L,)
        prompts: list[str] = []
        for lv, count in zip(levels, counts.tolist(), strict=True):
            level_rng = np.random.default_rng([_SALT, seed, s, lv.operands, lv.digits])
            prompts += distinct(lv, count, split, level_rng)
        return [make_problem(prompts[i]) for i in rng.permutation(len(prompts))]

    def capacity(self, split: str) -> int | None:
        """Largest n with n * w_L <= P_L for every level, P_L its distinct prompts in split.

        problems(split, n, seed) succeeds for every seed when n <= capacity. Only one-digit levels
        with at most 4 operands are counted (o2d1: about 25 per eval split); every other level
        holds thousands of prompts per split. None when no such level has weight.
        """
        check_choice("split", split, SPLITS)
        caps = []
        for lv in self.levels:
            if lv.weight > 0 and enumerable(lv):
                size = len(level_pool(lv, split))
                n = math.floor(size / lv.weight)
                while n * lv.weight > size:  # agree with stratify's float n * w exactly
                    n -= 1
                while (n + 1) * lv.weight <= size:
                    n += 1
                caps.append(n)
        return min(caps) if caps else None

    def corpus(
        self, n: int, seed: int, style_weights: Mapping[str, float] | None = None
    ) -> list[tuple[Problem, str]]:
        """n (train problem, correct demonstration) pairs; levels ~ mix, styles ~ style_weights.

        Problems are drawn with replacement (the small levels hold only dozens of train prompts).
        The default styles, terse 0.4 / worked 0.4 / rechecked 0.2, put both short and long
        correct answers in the base policy, so RL can move response length either way without
        changing correctness; that is what lets length change be split into work and padding.
        """
        check_int("n", n, 0)
        check_int("seed", seed, 0)
        weights = dict(DEFAULT_STYLE_WEIGHTS if style_weights is None else style_weights)
        style_p = _weights("style_weights", weights, self.styles, "styles")  # (S,)
        levels = self.levels
        rng = np.random.default_rng([_SALT, seed, len(SPLITS)])
        level_of = rng.choice(len(levels), size=n, p=[lv.weight for lv in levels])  # (n,)
        style_of = rng.choice(len(self.styles), size=n, p=style_p)  # (n,)
        prompts: list[str] = [""] * n
        for j, lv in enumerate(levels):
            where = np.flatnonzero(level_of == j).tolist()
            if where:
                drawn = take(in_split(lv, "train", rng), len(where), 1000 + 50 * len(where))
                if len(drawn) < len(where):
                    raise ValueError(f"level {lv.label} yields too few train prompts")
                for i, p in zip(where, drawn, strict=True):
                    prompts[i] = p
        out = []
        for p, k in zip(prompts, style_of.tolist(), strict=True):
            problem = make_problem(p)
            out.append((problem, self.demonstration(problem, self.styles[k], rng)))
        return out

    # ----------------------------------------------------------------------------- responses

    def demonstration(self, problem: Problem, style: str, rng: np.random.Generator) -> str:
        """A correct response in `style`; rechecked repeats 1-2 random steps after themselves;
        with a tail, 0..tail_checks checks follow the answer (drawn after the style's draws)."""
        check_choice("style", style, self.styles)
        xs = operands_of(problem.prompt)
        if problem.reference != str(sum(xs)):
            raise ValueError(f"reference {problem.reference!r} is not the sum {problem.prompt!r}")
        answer = "#" + problem.reference
        if style == "terse":
            solution = answer
        else:
            steps = worked_steps(xs)
            if style == "rechecked":
                checked = rng.integers(0, len(steps), size=int(rng.integers(1, 3)))  # (1 or 2,)
                times = np.bincount(checked, minlength=len(steps)).tolist()  # (steps,)
                pairs = zip(steps, times, strict=True)
                steps = [x for s, t in pairs for x in [s] + [RECHECK + s] * t]
            solution = ";".join(steps) + ";" + answer
        if not self.tail_checks:
            return solution  # no draw: the original task's corpus stays bit-for-bit the same
        return solution + check_lines(xs, int(rng.integers(0, self.tail_checks + 1)))

    def verify(self, problem: Problem, response: str, finished: bool) -> Verdict:
        """correct iff finished and the solution == <anything> '#' reference; truncated -> wrong.
        The solution is the whole response, or with a tail the text before its first '&'."""
        if not isinstance(response, str):
            raise ValueError(f"response must be a str, got {type(response).__name__}")
        if self.tail_checks:
            response = split_tail(response)[0]  # nothing from the first '&' on is ever read
        if not finished:
            return Verdict(correct=False, truncated=True, answer=None)
        start = response.rfind("#", max(0, len(response) - MAX_ANSWER_CHARS - 1))
        answer = response[start + 1 :] if start >= 0 else ""
        if not (answer.isascii() and answer.isdigit()):
            return Verdict(correct=False, truncated=False, answer=None)
        return Verdict(correct=answer == problem.reference, truncated=False, answer=answer)

    @property
    def stratum_keys(self) -> tuple[str, ...]:
        """Stratum keys this task provides beyond base.GENERIC_STRATA: with a checking tail,
        'check_lines' (the number of checks a response wrote)."""
        return ("check_lines",) if self.tail_checks else ()

    def stratum(self, problem: Problem, response: str, key: str) -> int:
        """The response's stratum under one of `stratum_keys`."""
        if key not in self.stratum_keys:
            raise ValueError(f"task {self.name!r} provides no stratum {key!r}")
        return split_tail(response)[1].count(TAIL)

    def length_split(self, problem: Problem, response: str) -> LengthSplit:
        """redundant = chars of 'chk' segments and repeated steps (with their ';') and of the
        tail, if the task has one; work = the rest."""
        if not isinstance(response, str):
            raise ValueError(f"response must be a str, got {type(response).__name__}")
        tail = ""
        if self.tail_checks:
            response, tail = split_tail(response)
        needed = Counter(worked_steps(operands_of(problem.prompt)))  # a 0 operand repeats a step
        segments = response.split(";")
        redundant, seen = 0, Counter()
        for i, seg in enumerate(segments):
            sep = 1 if i < len(segments) - 1 else 0
            if seg.startswith(RECHECK):
                redundant += len(seg) + sep
            elif _STEP.fullmatch(seg):
                seen[seg] += 1
                if seen[seg] > max(needed[seg], 1):
                    redundant += len(seg) + sep
        return LengthSplit(work=len(response) - redundant, redundant=redundant + len(tail))


# ------------------------------------------------------------------------------- validation


def _range(name: str, v: object, lo: int, hi: int) -> tuple[int, int]:
    pair = (v, v) if isinstance(v, int) and not isinstance(v, bool) else v
    if not (
        isinstance(pair, tuple | list)
        and len(pair) == 2
        and all(isinstance(x, int) and not isinstance(x, bool) for x in pair)
    ):
        raise ValueError(f"{name} must be an integer or a [min, max] pair of integers, got {v!r}")
    a, b = pair
    if not lo <= a <= b <= hi:
        raise ValueError(f"{name} must satisfy {lo} <= min <= max <= {hi}, got {v!r}")
    return (int(a), int(b))


def _weights(name: str, raw: Mapping, valid: tuple[str, ...] | list[str], what: str) -> np.ndarray:
    """Validated non-negative weights over `valid` (missing keys 0), normalized to sum 1."""
    if not isinstance(raw, Mapping):
        raise ValueError(f"{name} must be a mapping of {what} to weights, got {raw!r}")
    for key, value in raw.items():
        if key not in valid:
            raise ValueError(f"{name} key {key!r} is not valid; valid {what}: {', '.join(valid)}")
        number = not isinstance(value, bool) and isinstance(value, int | float | np.number)
        if not (number and value >= 0 and math.isfinite(value)):
            raise ValueError(f"{name}[{key!r}] must be a finite number >= 0, got {value!r}")
    w = np.array([float(raw.get(k, 0.0)) for k in valid])  # (K,)
    if not w.sum() > 0:
        raise ValueError(f"{name} must give some {what} a positive weight, got {dict(raw)!r}")
    return w / w.sum()


def _mix(mix: object, grid: list[tuple[str, int, int]]) -> tuple[tuple[str, float], ...]:
    try:
        raw = dict(mix) if isinstance(mix, tuple | list) else mix
    except (TypeError, ValueError):
        raise ValueError(f"mix must be a mapping of levels to weights, got {mix!r}") from None
    labels = [lab for lab, _, _ in grid]
    _weights("mix", raw, labels, "levels")  # type: ignore[arg-type]
    return tuple(sorted((k, float(v)) for k, v in raw.items()))  # type: ignore[union-attr]

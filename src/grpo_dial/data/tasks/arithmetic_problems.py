"""Arithmetic problems: the difficulty grid, splits by hash, and the seeded prompt samplers.

Problems. A level (o, d), labelled "o{o}d{d}", is a sum of o operands with up to d digits each:
every operand's digit count is uniform on 1..d, then one random operand is forced to d digits
(so the label is exactly (number of operands, max digits) of the prompt); a k-digit number is
uniform on [10^(k-1), 10^k), one-digit numbers include 0. Prompt "17+305+9=", reference "331",
prompt_id "arith-" + first 16 hex of sha1(prompt) (the data/ids.py rule, without repeats).

Splits. A prompt's split is a function of its text alone: u = int(sha1(prompt)[:16 hex]) / 16^16,
train u < 1/2, eval 1/2 <= u < 3/4, heldout u >= 3/4. Samplers reject candidates of other
splits, so the splits never share a prompt for any seeds, sizes or options. One-digit levels with
at most 4 operands are small enough to run out (o2d1 has 100 prompts, 51/19/30 in
train/eval/heldout) and are enumerated; larger levels are drawn by rejection.
"""

from __future__ import annotations

import bisect
import hashlib
import itertools
import re
from collections.abc import Iterator
from typing import NamedTuple

import numpy as np

from grpo_dial.data.tasks.base import SPLITS, Problem

_SPLIT_EDGES = (0.5, 0.75)  # train [0, .5), eval [.5, .75), heldout [.75, 1) of the sha1 position
_PROMPT = re.compile(r"[0-9]+(?:\+[0-9]+)+=")
_CHUNK = 256  # candidate prompts drawn per round of rejection sampling


class Level(NamedTuple):
    """One cell of the difficulty grid and its normalized weight in the mix."""

    label: str
    operands: int
    digits: int
    weight: float


def level_label(o: int, d: int) -> str:
    return f"o{o}d{d}"


def prompt_hash(prompt: str) -> str:
    return hashlib.sha1(prompt.encode("ascii")).hexdigest()[:16]


def split_of(prompt: str) -> str:
    """The split a prompt belongs to: the position of sha1(prompt) in [0, 1) against the edges."""
    return SPLITS[bisect.bisect_right(_SPLIT_EDGES, int(prompt_hash(prompt), 16) / 16**16)]


def operands_of(prompt: str) -> list[int]:
    if not isinstance(prompt, str) or not _PROMPT.fullmatch(prompt):
        raise ValueError(f"not an arithmetic prompt (like '17+305+9='): {prompt!r}")
    return [int(x) for x in prompt[:-1].split("+")]


def worked_steps(xs: list[int]) -> list[str]:
    """The running partial sums x1+x2=s2, s2+x3=s3, ... of a worked solution."""
    sums = list(itertools.accumulate(xs))
    return [f"{a}+{x}={a + x}" for a, x in zip(sums[:-1], xs[1:], strict=True)]


def make_problem(prompt: str) -> Problem:
    xs = prompt[:-1].split("+")
    return Problem(
        prompt_id="arith-" + prompt_hash(prompt),
        prompt=prompt,
        reference=str(sum(int(x) for x in xs)),
        difficulty=level_label(len(xs), max(len(x) for x in xs)),
    )


def _candidates(lv: Level, rng: np.random.Generator) -> Iterator[str]:
    """Endless prompts of level lv, drawn _CHUNK at a time (the stream does not depend on n)."""
    o, d = lv.operands, lv.digits
    while True:
        k = rng.integers(1, d + 1, size=(_CHUNK, o))  # (C, o) digit counts
        k[np.arange(_CHUNK), rng.integers(0, o, size=_CHUNK)] = d
        low = np.where(k == 1, 0, 10 ** (k - 1))  # (C, o)
        x = rng.integers(low, 10**k)  # (C, o)
        for row in x.tolist():
            yield "+".join(map(str, row)) + "="


def in_split(lv: Level, split: str, rng: np.random.Generator) -> Iterator[str | None]:
    """The candidate stream with other splits' prompts replaced by None (so budgets count them)."""
    return (p if split_of(p) == split else None for p in _candidates(lv, rng))


def take(stream: Iterator[str | None], count: int, budget: int, distinct: bool = False) -> list:
    """Up to `count` non-None items (unique if distinct) from at most `budget` stream items."""
    kept: list[str] = []
    seen: set[str] = set()
    for p in itertools.islice(stream, budget if count > 0 else 0):
        if p is not None and not (distinct and p in seen):
            seen.add(p)
            kept.append(p)
            if len(kept) == count:
                break
    return kept


def enumerable(lv: Level) -> bool:
    """One-digit levels of at most 10^4 prompts: the only ones a request can exhaust."""
    return lv.digits == 1 and lv.operands <= 4


def level_pool(lv: Level, split: str) -> list[str]:
    """Every prompt of a one-digit level in split, in lexicographic operand order."""
    tuples = itertools.product(range(10), repeat=lv.operands)
    return [p for p in ("+".join(map(str, t)) + "=" for t in tuples) if split_of(p) == split]


def distinct(lv: Level, count: int, split: str, rng: np.random.Generator) -> list[str]:
    """count distinct prompts of level lv in split; small one-digit levels are enumerated."""
    if count == 0:
        return []
    if enumerable(lv) and 16 * count > 10**lv.operands:  # rejection would stall near the end
        pool = level_pool(lv, split)
        if count > len(pool):
            raise ValueError(
                f"split {split!r} holds only {len(pool)} distinct prompts of level {lv.label} "
                f"(asked for {count}); ask for fewer problems or give {lv.label} less weight"
            )
        return [pool[i] for i in rng.permutation(len(pool))[:count]]
    out = take(in_split(lv, split, rng), count, 1000 + 50 * count, distinct=True)
    if len(out) < count:
        raise ValueError(
            f"could not draw {count} distinct {split!r} prompts of level {lv.label}; "
            "ask for fewer problems or give the level less weight"
        )
    return out


def stratify(n: int, w: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Integer counts summing to n: floor(n w) plus one for the largest remainders (random ties)."""
    exact = n * w  # (L,)
    counts = np.floor(exact).astype(np.int64)  # (L,)
    rest = np.where(w > 0, exact - counts, -1.0)  # (L,) zero-weight levels never get one
    order = np.lexsort((rng.random(len(w)), -rest))  # (L,) by remainder, ties at random
    counts[order[: n - int(counts.sum())]] += 1
    return counts

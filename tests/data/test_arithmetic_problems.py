"""Arithmetic problem generation: labels, worked steps, largest-remainder counts, small-level
pools, split exhaustion."""

from __future__ import annotations

import hashlib
import itertools

import numpy as np
import pytest

from grpo_dial.data.tasks.arithmetic_problems import (
    Level,
    distinct,
    level_pool,
    make_problem,
    operands_of,
    stratify,
    worked_steps,
)


def test_problem_fields_from_the_prompt() -> None:
    p = make_problem("17+305+9=")
    assert (p.reference, p.difficulty) == ("331", "o3d3")
    assert p.prompt_id == "arith-" + hashlib.sha1(b"17+305+9=").hexdigest()[:16]
    assert worked_steps(operands_of("17+305+9=")) == ["17+305=322", "322+9=331"]
    with pytest.raises(ValueError, match="not an arithmetic prompt"):
        operands_of("17 + 3 =")


@pytest.mark.parametrize("n", [0, 1, 7, 100])
def test_stratify_is_largest_remainder(n: int) -> None:
    w = np.array([0.5, 0.3, 0.2, 0.0])
    counts = stratify(n, w, np.random.default_rng(0))
    assert counts.sum() == n and counts[-1] == 0
    assert (np.abs(counts - n * w) < 1).all()


def test_small_level_pool_is_every_prompt_of_the_split() -> None:
    lv = Level("o2d1", 2, 1, 1.0)
    pools = {s: level_pool(lv, s) for s in ("train", "eval", "heldout")}
    every = ["+".join(map(str, t)) + "=" for t in itertools.product(range(10), repeat=2)]
    assert sorted(sum(pools.values(), [])) == sorted(every)
    assert [len(pools[s]) for s in ("train", "eval", "heldout")] == [51, 19, 30]
    got = distinct(lv, 19, "eval", np.random.default_rng(0))
    assert sorted(got) == sorted(pools["eval"])
    with pytest.raises(ValueError, match="holds only 19 distinct prompts of level o2d1"):
        distinct(lv, 20, "eval", np.random.default_rng(0))

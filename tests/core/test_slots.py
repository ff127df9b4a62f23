"""The baseline and scale slots: A_i = (r_i - b_i) / s_i, then the 'advantage' transforms in
registration order. The toy scale of tests/toy_mad.py (the group's mean absolute deviation) checks
the hand numbers, its composition with Stratified GRPO against a loop over cells, the refusal
of two scale owners by name, and the stated order."""

from __future__ import annotations

import pytest
import torch
import toy_mad as toy

from grpo_dial.core.advantage import advantages
from grpo_dial.core.dial import Dial, group_estimator, read_arm
from grpo_dial.core.estimators import (
    advantage_estimators,
    register_estimator,
    slot_owner,
    unregister_estimator,
)
from grpo_dial.core.settings import Setting


def _switch(name: str, doc: str) -> dict:
    return {name: Setting(False, doc, kind=bool)}


@pytest.fixture
def toy_mad():
    """The toy MAD scale slot of tests/toy_mad.py, registered for one test only."""
    with toy.registered():
        yield


@pytest.fixture
def toy_range(toy_mad):
    """A second scale slot (the group's reward range), registered beside toy_mad."""

    def spread(stats, dial):
        r, idx, m = stats.rewards, stats.index, stats.size.numel()
        hi = r.new_full((m,), -torch.inf).scatter_reduce(0, idx, r, "amax")
        lo = r.new_full((m,), torch.inf).scatter_reduce(0, idx, r, "amin")
        return torch.where(hi > lo, hi - lo, 1.0)[idx]

    register_estimator(
        "toy_range",
        kind="scale",
        fields=_switch("toy_range", "Divide by the group's reward range (a toy)."),
        active=lambda dial: dial.toy_range,
    )(spread)
    yield
    unregister_estimator("toy_range")


@pytest.fixture
def toy_shift(toy_mad):
    """A transform registered after every other: A <- A + 1 (order-revealing: not linear)."""
    register_estimator(
        "toy_shift",
        kind="advantage",
        fields=_switch("toy_shift", "Add 1 to every advantage (a toy)."),
        active=lambda dial: dial.toy_shift,
    )(lambda adv, stats, dial, regroup: adv + 1.0)
    yield
    unregister_estimator("toy_shift")


# group 7: one right of four; group 3: silent (all 1); group 5: a singleton; rows interleaved
REWARDS = [1.0, 1.0, 0.0, 0.5, 1.0, 0.0, 1.0, 0.0, 1.0]
IDS = [7, 3, 7, 5, 3, 7, 3, 7, 3]
STRATA = [0, 0, 0, 2, 1, 1, 1, 1, 0]  # group 7: cells {1, 0} and {0, 0}


def _adv(dial: Dial, **context) -> list[float]:
    r = torch.tensor(REWARDS, dtype=torch.float64)
    return advantages(r, torch.tensor(IDS), dial, **context).tolist()


def test_a_scale_slot_divides_the_centred_reward_hand_numbers(toy_mad):
    # group 7: mean 1/4, |r - mean| = 3/4, 1/4, 1/4, 1/4, MAD = 3/8: A = 2, -2/3 x 3;
    # the silent group and the singleton: MAD 0 -> 1, centred 0 -> A = 0
    dial = Dial(toy_mad=True)
    assert slot_owner(dial, "scale").name == "toy_mad" and slot_owner(dial, "baseline") is None
    want = [2.0, 0.0, -2 / 3, 0.0, 0.0, -2 / 3, 0.0, -2 / 3, 0.0]
    assert _adv(dial) == pytest.approx(want, abs=1e-15)
    # a baseline owner composes with it: RLOO's r - b = 4/3 (r - mean) = 1, -1/3: over 3/8
    rloo = [8 / 3, 0.0, -8 / 9, 0.0, 0.0, -8 / 9, 0.0, -8 / 9, 0.0]
    assert _adv(dial.replace(baseline="leave_one_out")) == pytest.approx(rloo, abs=1e-15)
    # verl's lone response (b = 0 for a group of one) keeps its reward over MAD 1
    lone = _adv(dial.replace(singleton="reward"))
    assert lone[3] == 0.5 and lone[0] == pytest.approx(2.0, abs=1e-15)
    assert group_estimator(dial) == Dial()  # the slot owner is an advantage estimator


def test_the_scale_slot_composes_with_strata_hand_numbers(toy_mad):
    # cell (7, 0): rewards 1, 0: MAD 1/2, A^(s) = 1, -1; cell (7, 1): 0, 0: silent, 0
    # beta 0.5: 0.5 A^(s) + 0.5 A (A = 2, -2/3 over the whole group's MAD 3/8)
    strata = torch.tensor(STRATA)
    half = _adv(Dial(toy_mad=True, strata="truncated", strata_blend=0.5), strata=strata)
    want = [1.5, 0.0, -5 / 6, 0.0, 0.0, -1 / 3, 0.0, -1 / 3, 0.0]
    assert half == pytest.approx(want, abs=1e-15)
    pure = _adv(Dial(toy_mad=True, strata="truncated"), strata=strata)
    assert pure == pytest.approx([1.0, 0.0, -1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0], abs=1e-15)


def _reference(rewards, ids, strata, beta):
    """Loop over groups and cells: beta (r - mean_c) / MAD_c + (1 - beta) (r - mean_g) / MAD_g,
    MAD 1 where it is 0."""

    def mad_adv(rows):
        vals = [rewards[i] for i in rows]
        mean = sum(vals) / len(vals)
        mad = sum(abs(v - mean) for v in vals) / len(vals)
        mad = mad if mad > 0 else 1.0
        return {i: (rewards[i] - mean) / mad for i in rows}

    out = [0.0] * len(rewards)
    for g in set(ids):
        rows = [i for i, x in enumerate(ids) if x == g]
        whole = mad_adv(rows)
        for s in {strata[i] for i in rows}:
            cell = mad_adv([i for i in rows if strata[i] == s])
            for i, a in cell.items():
                out[i] = beta * a + (1 - beta) * whole[i]
    return out


@pytest.mark.parametrize("beta", [0.5, 1.0])
def test_the_scale_slot_with_strata_equals_a_loop_over_cells(toy_mad, beta):
    gen = torch.Generator().manual_seed(11)
    for _ in range(20):
        n = int(torch.randint(1, 40, (1,), generator=gen))
        ids = torch.randint(0, 6, (n,), generator=gen)
        strata = torch.randint(0, 3, (n,), generator=gen)
        rewards = torch.randint(0, 3, (n,), generator=gen).double() / 2  # ties and silent cells
        dial = Dial(toy_mad=True, strata="truncated", strata_blend=beta)
        got = advantages(rewards, ids, dial, strata=strata).tolist()
        want = _reference(rewards.tolist(), ids.tolist(), strata.tolist(), beta)
        assert got == pytest.approx(want, abs=1e-12)


def test_two_scale_owners_are_refused_by_name(toy_range):
    Dial(toy_mad=True), Dial(toy_range=True)  # each alone is a dial
    both = "estimators 'toy_mad' and 'toy_range' both claim the scale slot"
    with pytest.raises(ValueError, match=both) as caught:
        Dial(toy_mad=True, toy_range=True)
    assert "\n" not in str(caught.value)
    with pytest.raises(ValueError, match=both):  # the DAG build reads its arms this way
        read_arm({"preset": "grpo", "toy_mad": True, "toy_range": True})
    with pytest.raises(ValueError, match="'batch_std' and 'toy_mad' both claim the scale slot"):
        read_arm({"preset": "batch_std", "toy_mad": True})


def test_baseline_then_scale_then_transforms_hand_numbers(toy_shift):
    # RLOO's centred reward 1, -1/3 (group 7), over MAD 3/8: 8/3, -8/9; GPG's B/M = 9/6 (six
    # nonzero rewards): 4, -4/3; then the toy's + 1: 5, -1/3 (silent and singleton: 0 -> 1).
    # Other orders differ: r/s - b, or + 1 before B/M (5.5, -0.5).
    dial = Dial(baseline="leave_one_out", toy_mad=True, gpg_scale="nonzero_reward", toy_shift=True)
    names = [e.name for e in advantage_estimators(dial)]
    assert names == ["rloo", "toy_mad", "gpg", "toy_shift"]
    want = [5.0, 1.0, -1 / 3, 1.0, 1.0, -1 / 3, 1.0, -1 / 3, 1.0]
    assert _adv(dial) == pytest.approx(want, abs=1e-14)

"""core.registry: what a registration keeps (its needs) and the backend refusal's line."""

import pytest

from grpo_dial.core.dial import Dial
from grpo_dial.core.estimators import ESTIMATORS, refusal, register_estimator, unregister_estimator
from grpo_dial.core.registry import logged_values, slot_owner
from grpo_dial.core.settings import Setting


def test_refusal_names_the_switch_and_why():
    dial = Dial().replace(length_norm="lambda")
    assert refusal(dial, "trl") == (
        "length_norm",
        "length_norm = 'lambda': TRL has no length-weighted token mean",
    )
    assert refusal(dial, "own") is None
    assert refusal(Dial(), "trl") is None


@pytest.fixture
def toy():
    yield "toy_needs"
    if "toy_needs" in ESTIMATORS:
        unregister_estimator("toy_needs")


def test_a_registration_keeps_its_needs_as_a_tuple(toy):
    @register_estimator(
        toy, kind="advantage", fields={"toy_needs_on": Setting(False, "a toy switch.", kind=bool)},
        active=lambda dial: dial.toy_needs_on, needs=["lengths", "strata"],
    )  # fmt: skip
    def function(adv, stats, dial, regroup, lengths=None, strata=None):
        return adv

    assert ESTIMATORS[toy].needs == ("lengths", "strata")


def test_a_registration_keeps_each_argument(toy):
    def log(dial, inputs, batch):
        return {"toy_c": float(dial.toy_needs_on)}  # reads the dial it is given

    register_estimator(
        toy, kind="advantage", fields={"toy_needs_on": Setting(False, "a toy switch.", kind=bool)},
        active=lambda dial: dial.toy_needs_on, choices={"length_norm": ("toy_norm",)},
        columns=["toy_c"], log=log, backends=["own", "trl"], why_not="toy reason",
    )(lambda adv, stats, dial, regroup: adv)  # fmt: skip
    est = ESTIMATORS[toy]
    assert est.columns == ("toy_c",) and est.backends == ("own", "trl")
    assert est.choices == {"length_norm": ("toy_norm",)} and est.why_not == "toy reason"
    assert logged_values(Dial(toy_needs_on=True), {}, None)["toy_c"] == 1.0
    unregister_estimator(toy)
    register_estimator(
        toy, kind="advantage", fields={"toy_needs_on": Setting(False, "a toy switch.", kind=bool)},
        active=lambda dial: dial.toy_needs_on,
    )(lambda adv, stats, dial, regroup: adv)  # fmt: skip
    assert ESTIMATORS[toy].why_not == "" and ESTIMATORS[toy].backends == ("own",)


def test_slot_owner_checks_its_own_slot_and_names_a_bad_one():
    with pytest.raises(ValueError) as err:
        slot_owner(Dial(), "bias")
    assert str(err.value) == "slot 'bias' is not valid; choose one of baseline, scale"
    dial = Dial(baseline="leave_one_out", std_power=0.0)  # made before the clash exists
    register_estimator(
        "toy_clash", kind="baseline", fields={}, switch="baseline",
        choices={"baseline": ("leave_one_out",)}, active=lambda d: d.baseline == "leave_one_out",
    )(lambda stats, dial: stats.rewards)  # fmt: skip
    try:
        assert slot_owner(dial, "scale") is None  # the scale slot has no clash
        with pytest.raises(ValueError) as err:
            slot_owner(dial, "baseline")
        assert str(err.value) == (
            "estimators 'rloo' and 'toy_clash' both claim the baseline slot; a dial has one "
            "baseline"
        )
    finally:
        unregister_estimator("toy_clash")

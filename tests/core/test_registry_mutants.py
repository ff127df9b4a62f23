"""core.registry: what a registration keeps (its needs) and the backend refusal's line."""

import pytest

from grpo_dial.core.dial import Dial
from grpo_dial.core.estimators import ESTIMATORS, refusal, register_estimator, unregister_estimator
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

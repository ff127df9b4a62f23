"""core.estimators: a registered estimator's own `check` reaches the Dial (mutation testing
found it unpinned: the built-in ones register at import, before any mutant is switched on;
docs/development.md#mutation-testing)."""

from __future__ import annotations

import pytest

from grpo_dial.core.dial import Dial
from grpo_dial.core.estimators import register_estimator, unregister_estimator
from grpo_dial.core.settings import Setting


@pytest.fixture
def toy_with_check():
    register_estimator(
        "toy_checked",
        kind="advantage",
        fields={"toy_checked_on": Setting(False, "h", kind=bool)},
        active=lambda dial: dial.toy_checked_on,
        check=lambda dial: "toy_checked_on needs std_power 0" if (
            dial.toy_checked_on and dial.std_power != 0) else None,
    )(lambda dial: None)  # fmt: skip
    yield
    unregister_estimator("toy_checked")


def test_an_estimators_check_refuses_the_dial_with_its_line(toy_with_check):
    with pytest.raises(ValueError, match="^toy_checked_on needs std_power 0$"):
        Dial(toy_checked_on=True, std_power=1.0)
    assert Dial(toy_checked_on=True, std_power=0.0).toy_checked_on is True

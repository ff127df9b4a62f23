"""core.estimators: a registered estimator's own `check` reaches the Dial (mutation testing
found it unpinned: the built-in ones register at import, before any mutant is switched on;
docs/development.md#mutation-testing)."""

from __future__ import annotations

import math

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


def test_logged_values_of_a_step_by_hand():
    """strata: groups [0,0,0,1,1] with strata [0,1,1,2,2] -> cells (0,0),(0,1),(1,2) = 3, one
    group split; anchor: the mean of the prompts' anchors; lambda: NaN (lambda-GRPO is off)."""
    import types

    import torch

    from grpo_dial.core.estimators import log_columns, logged_values

    assert log_columns() == ("lambda", "strata_cells", "strata_split_groups", "anchor")
    dial = Dial(strata="truncated", anchor="prompt")
    batch = types.SimpleNamespace(group_ids=torch.tensor([0, 0, 0, 1, 1]), rewards=[0] * 5)
    inputs = {"strata": torch.tensor([0, 1, 1, 2, 2]), "anchor": [0.2, 0.6]}
    got = logged_values(dial, inputs, batch)
    assert list(got) == list(log_columns())
    assert math.isnan(got["lambda"])
    assert got["strata_cells"] == 3 and got["strata_split_groups"] == 1
    assert got["anchor"] == pytest.approx(0.4)
    empty = logged_values(dial, {**inputs, "strata": torch.tensor([])}, batch)
    assert math.isnan(empty["strata_cells"]) and math.isnan(empty["strata_split_groups"])

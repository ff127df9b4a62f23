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
    assert list(empty) == list(log_columns())  # the same columns when no stratum is given


def test_registration_refusals_and_what_a_registration_keeps():
    from grpo_dial.core.arm_names import display_names
    from grpo_dial.core.estimators import ESTIMATORS

    fields = {"toy_kept_on": Setting(False, "h", kind=bool)}
    with pytest.raises(
        ValueError,
        match="^estimator kind 'x' is not valid; choose one of "
        "baseline, scale, advantage, weights, ratio$",
    ):
        register_estimator("toy_kept", kind="x", fields=fields, active=bool)
    with pytest.raises(
        ValueError, match="^estimator 'toy_kept' logs columns \\('c',\\) but has no log function$"
    ):
        register_estimator("toy_kept", kind="advantage", fields=fields, active=bool, columns=("c",))

    def log(dial, inputs, batch):
        return {"c": 1.0}

    register_estimator(
        "toy_kept", label="Toy kept", kind="advantage", fields=fields,
        active=lambda dial: dial.toy_kept_on, columns=("c",), log=log,
        preset={"toy_kept_on": True},
    )(lambda dial: None)  # fmt: skip
    try:
        est = ESTIMATORS["toy_kept"]
        assert est.label == "Toy kept" and display_names()["toy_kept"] == "Toy kept"
        assert est.log is log and est.preset == {"toy_kept_on": True}
    finally:
        unregister_estimator("toy_kept")


@pytest.mark.skipif(
    not __import__("torch").cuda.is_available(), reason="needs a CUDA device"
)
def test_strata_on_the_cpu_are_counted_with_groups_on_the_device():
    import types

    import torch

    from grpo_dial.core.estimators import logged_values

    batch = types.SimpleNamespace(group_ids=torch.tensor([0, 0, 1], device="cuda"), rewards=[0] * 3)
    got = logged_values(Dial(strata="truncated"), {"strata": torch.tensor([0, 1, 1])}, batch)
    assert got["strata_cells"] == 3 and got["strata_split_groups"] == 1


def test_hadw_weights_at_the_default_scale_and_the_lambda_clash_line():
    import torch

    from grpo_dial.core.estimators import hadw_weights

    # p_hat 0.3 below the anchor 0.5 (harder): A > 0 grows by e^0.2, A < 0 shrinks by e^-0.2
    got = hadw_weights(torch.tensor([1.0, -1.0]), torch.tensor([0.3, 0.3]), torch.tensor(0.5))
    assert got.tolist() == pytest.approx([1.221403, 0.818731], abs=1e-6)
    with pytest.raises(ValueError) as err:
        Dial(lambda_learnable=True)
    assert str(err.value).endswith("lambda_learnable needs length_norm='lambda'")

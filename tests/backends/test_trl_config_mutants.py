"""backends.trl.config: a length normalizer TRL has no loss_type for is refused by its field
name, even when its estimator says TRL can run it (docs/development.md#mutation-testing)."""

from __future__ import annotations

import pytest

from grpo_dial.backends.trl.config import TRL_EPS, TRL_STD_DDOF, refusal
from grpo_dial.core.dial import Dial
from grpo_dial.core.estimators import register_estimator, unregister_estimator
from grpo_dial.core.settings import Setting


@pytest.fixture
def trl_weights():
    register_estimator(
        "toy_trl_weights",
        kind="weights",
        fields={"toy_trl_w": Setting(1.0, "h", kind=float)},
        choices={"length_norm": ("toy_w",)},
        switch="length_norm",
        active=lambda dial: dial.length_norm == "toy_w",
        backends=("own", "trl"),
    )(lambda dial: None)
    yield
    unregister_estimator("toy_trl_weights")


def test_a_normalizer_without_a_trl_loss_type_is_refused_by_field(trl_weights):
    assert refusal(Dial(length_norm="toy_w", std_ddof=TRL_STD_DDOF, eps=TRL_EPS), 24) == (
        "length_norm",
        "length_norm = 'toy_w': TRL has no such loss_type",
    )

"""backends.trl.config: a length normalizer TRL has no loss_type for is refused by its field
name, even when its estimator says TRL can run it; an own arm before a refused trl arm does not
end the search (docs/development.md#mutation-testing)."""

from __future__ import annotations

import pytest

from grpo_dial.backends.trl.config import TRL_EPS, TRL_STD_DDOF, backend_error, refusal
from grpo_dial.core.dial import Dial, read_arm
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


@pytest.mark.parametrize(
    ("dial", "adaptive", "line"),
    [
        (Dial(std_power=0.5), False, ("std_power", "std_power = 0.5: TRL's scale_rewards divides "
                                      "by the std (std_power 1) or not at all (0)")),
        (Dial(silent="drop", std_ddof=TRL_STD_DDOF, eps=TRL_EPS), False,
         ("silent", "silent = 'drop': TRL keeps silent groups (no dynamic-sampling refill); "
                    "use 'keep'")),
        (Dial(std_ddof=TRL_STD_DDOF, eps=TRL_EPS), True,
         ("group_size", "group_size = 'adaptive': TRL gives every prompt num_generations "
                        "responses")),
    ],
)  # fmt: skip
def test_each_core_refusal_line_word_for_word(dial, adaptive, line):
    assert refusal(dial, 24, adaptive) == line


def test_an_own_arm_before_a_refused_trl_arm_is_skipped_not_the_end():
    # the own arm's dial (population std) is what TRL refuses; only the trl arm is checked
    arms = {
        "own_grpo": read_arm({"preset": "grpo"}, max_new_tokens=24, backend="own"),
        "trl_dr": read_arm({"preset": "dr_grpo", "silent": "drop"}, max_new_tokens=24,
                           backend="trl"),
    }  # fmt: skip
    assert backend_error(arms, 24) == (
        "config error at 'dials.trl_dr.silent': the trl backend cannot train silent = 'drop': "
        "TRL keeps silent groups (no dynamic-sampling refill); use 'keep' (backend: own can; "
        "config/trl.yaml restates the default's arms for TRL)"
    )

"""The estimator registry: a duplicate name fails loudly, an unknown one lists the valid names,
the three fixes are registered, a field is owned once. The toy estimator registered by a test
alone (tests/train/test_toy_estimator.py) shows the rest: one entry reaches everything."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from grpo_dial.core.dial import PRESETS, Dial, preset
from grpo_dial.core.estimators import (
    ESTIMATORS,
    active_estimators,
    get_estimator,
    register_estimator,
)

SCHEMA = Path(__file__).resolve().parents[2] / "workflow" / "schemas" / "config.schema.yaml"


def _config_with_arm(spec: dict) -> dict:
    config = yaml.safe_load((SCHEMA.parents[2] / "config" / "config.yaml").read_text())
    config["dials"] = {"t": spec}
    return config


ENGINES = [  # the engines' estimators (their advantage functions apply in this order) ...
    "singleton_reward", "rloo", "opo", "grpo_passk", "reinforce_pp", "batch_std", "gpg",
    "reinforce_pp_baseline", "gdpo", "gspo", "luspo", "token_sum", "bnpo", "verl_rows",
]  # fmt: skip
FIXES = ["lambda_grpo", "stratified_grpo", "hadw_grpo"]  # ... then the essay's three fixes


def test_the_engines_and_the_three_fixes_are_registered_in_order():
    assert list(ESTIMATORS) == ENGINES + FIXES
    for name, est in ESTIMATORS.items():
        if est.preset is None:  # a setting, not a method (verl's lone response, token sum, ..)
            assert name in ("singleton_reward", "token_sum", "verl_rows")
            continue
        assert PRESETS[name] == Dial(**est.preset)
        assert est in active_estimators(PRESETS[name])
    for name in FIXES:
        assert active_estimators(PRESETS[name]) == [ESTIMATORS[name]]
    assert active_estimators(preset("grpo")) == []


def test_a_duplicate_name_fails_and_an_unknown_one_lists_the_valid():
    with pytest.raises(ValueError, match="'hadw_grpo' is already registered"):
        register_estimator(
            "hadw_grpo", label="x", kind="advantage", fields={"x": None}, active=lambda d: False
        )(lambda *a: None)
    with pytest.raises(ValueError, match="dial field 'anchor' is already owned by 'hadw_grpo'"):
        register_estimator(
            "hadw_again", kind="advantage", fields={"anchor": None}, active=lambda d: False
        )(lambda *a: None)
    assert "hadw_again" not in ESTIMATORS
    with pytest.raises(
        ValueError,
        match="unknown estimator 'hdaw'; valid: batch_std, bnpo, gdpo, gpg, grpo_passk, gspo, hadw",
    ):
        get_estimator("hdaw")


def test_an_unregistered_preset_is_refused_by_name():
    with pytest.raises(
        ValueError, match="unknown preset 'toy_grpo'; valid presets: batch_std, bnpo, dapo"
    ):
        preset("toy_grpo")

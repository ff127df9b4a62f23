"""The estimator registry: a duplicate name fails loudly, an unknown one lists the valid names,
the three fixes are registered, and a toy estimator (one registered function) shows up in a
config arm, the config schema, the arms' display names and a figure label."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
import torch
import yaml

from grpo_dial.core.advantage import advantages, group_stats
from grpo_dial.core.arm_names import arm_name
from grpo_dial.core.dial import PRESETS, Dial, preset, read_arm
from grpo_dial.core.estimators import (
    ESTIMATORS,
    active_estimators,
    get_estimator,
    register_estimator,
)
from grpo_dial.dag.schema import config_error, read_schema

SCHEMA = Path(__file__).resolve().parents[2] / "workflow" / "schemas" / "config.schema.yaml"


def _config_with_arm(spec: dict) -> dict:
    config = yaml.safe_load((SCHEMA.parents[2] / "config" / "config.yaml").read_text())
    config["dials"] = {"t": spec}
    return config


@pytest.fixture
def toy():
    """A toy advantage estimator: the sign of the group advantage, on dials with alpha 0.5."""
    from grpo_dial.core.arm_names import ARM_NAMES

    @register_estimator(
        "toy_grpo",
        label="Toy GRPO",
        kind="advantage",
        fields=("std_power",),
        active=lambda dial: dial.std_power == 0.5,
        preset={"std_power": 0.5},
    )
    def sign_only(adv, stats, dial, regroup):
        return adv.sign()

    yield ESTIMATORS["toy_grpo"]
    del ESTIMATORS["toy_grpo"]
    ARM_NAMES.pop("toy_grpo", None)


def test_the_three_fixes_are_registered_in_order():
    assert list(ESTIMATORS) == ["lambda_grpo", "stratified_grpo", "hadw_grpo"]
    for name, est in ESTIMATORS.items():
        assert PRESETS[name] == Dial(**est.preset)
        assert active_estimators(PRESETS[name]) == [est]
    assert active_estimators(preset("grpo")) == []


def test_a_duplicate_name_fails_and_an_unknown_one_lists_the_valid():
    with pytest.raises(ValueError, match="'hadw_grpo' is already registered"):
        register_estimator(
            "hadw_grpo", label="x", kind="advantage", fields=(), active=lambda d: False
        )(lambda *a: None)
    with pytest.raises(ValueError, match="unknown estimator 'hdaw'; valid: hadw_grpo, lambda"):
        get_estimator("hdaw")


def test_a_toy_estimator_reaches_an_arm_the_schema_and_a_figure_label(toy):
    # a config arm: its recipe is a preset, and the advantage is the toy's
    arm = read_arm({"preset": "toy_grpo"})
    assert arm.dial == Dial(std_power=0.5) and active_estimators(arm.dial) == [toy]
    r = torch.tensor([1.0, 0.0, 0.0, 1.0, 1.0, 1.0], dtype=torch.float64)
    ids = torch.tensor([0, 0, 0, 1, 1, 1])
    stats = group_stats(r, ids)
    group = r - stats.mean[stats.index]  # the sign of A does not depend on the std factor
    assert advantages(r, ids, arm.dial).tolist() == group.sign().tolist()
    # the schema: the preset enum is the live list, so the arm validates
    assert config_error(_config_with_arm({"preset": "toy_grpo"}), read_schema(SCHEMA)) is None
    # a figure label: the figure stages pass ARM_NAMES, which now holds the registered label
    from grpo_dial.core.arm_names import ARM_NAMES
    from grpo_dial.figures.training import decomposition_labels

    runs = pd.DataFrame({"dial": ["toy_grpo", "grpo"], "seed": [3, 0]})
    assert decomposition_labels(runs, names=ARM_NAMES) == ["Toy GRPO, seed 3", "GRPO, seed 0"]
    assert arm_name("toy_grpo") == toy.label == "Toy GRPO"


def test_without_the_toy_the_schema_refuses_its_preset():
    error = config_error(_config_with_arm({"preset": "toy_grpo"}), read_schema(SCHEMA))
    assert error is not None and error.startswith("config error at 'dials.t.preset'")

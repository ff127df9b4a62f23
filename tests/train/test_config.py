"""TrainConfig and Allocation: bad values rejected with the field's name, help text on every
field, and the resume key a checkpoint is matched on."""

from __future__ import annotations

import math

import pytest

from grpo_dial.core.allocation import Allocation
from grpo_dial.train.config import RESUME_FREE, TrainConfig


@pytest.mark.parametrize(
    "field, value, message",
    [
        ("optimizer", "adam", "choose one of 'adamw', 'sgd'"),
        ("steps", 0, "steps must be an integer >= 1"),
        ("group_size", 2.0, "group_size must be an integer"),
        ("lr", -1.0, "lr must be a finite number > 0"),
        ("lr_scale", math.nan, "lr_scale must be a number, got nan"),
        ("grad_clip", 0.0, "grad_clip must be"),
        ("betas", (0.9,), "betas must be two numbers"),
        ("micro_batch", 0, "micro_batch must be an integer >= 1"),
        ("activation_reuse_mb", -1.0, "activation_reuse_mb must be a finite number >= 0"),
        ("kl_coef", -0.1, "kl_coef must be"),
        ("progress", "yes", "progress must be true or false"),
        ("resume", "overwrite", "resume='overwrite' is not valid; choose one of 'auto', 'strict'"),
        ("checker_warn_fraction", -0.1, "checker_warn_fraction must be a finite number >= 0"),
    ],
)
def test_config_rejects_bad_values(field, value, message):
    with pytest.raises(ValueError, match=message):
        TrainConfig(**{field: value})


def test_config_defaults_and_help():
    cfg = TrainConfig(betas=[0.8, 0.9])
    assert cfg.betas == (0.8, 0.9) and cfg.optimizer == "adamw" and cfg.kl_coef == 0.0
    for f in TrainConfig.__dataclass_fields__.values():  # help: the Setting's, else the field's
        spec = f.metadata.get("setting")
        assert len(spec.help if spec is not None else f.metadata["help"]) > 20


def test_config_rejects_bad_allocation_settings():
    with pytest.raises(ValueError, match="scheme='every' is not valid"):
        Allocation(scheme="every")
    with pytest.raises(ValueError, match="g_max must be at least g_min = 4, got 3"):
        Allocation(g_min=4, g_max=3)
    with pytest.raises(ValueError, match="decay must be in"):
        Allocation(decay=1.5)
    with pytest.raises(ValueError, match="allocation must be an Allocation"):
        TrainConfig(allocation={"scheme": "adaptive"})
    fields = Allocation.__dataclass_fields__.values()
    assert all(len(f.metadata["setting"].help) > 20 for f in fields)


def test_resume_key_is_plain_values_under_the_checkpointed_names():
    """Checkpoints store the allocation under the flat names TrainConfig once had, so a run
    checkpointed before Allocation was one field still resumes; RESUME_FREE fields are left out."""
    allocation = Allocation(scheme="adaptive", signal="dr_grpo", g_min=3, g_max=9,
                            unanimous="skip", prior_strength=4.0, decay=0.5)  # fmt: skip
    key = TrainConfig(allocation=allocation, micro_batch=2).resume_key()
    assert {k: key[k] for k in (
        "group_allocation", "allocation_signal", "g_min", "g_max", "unanimous",
        "tracker_prior_strength", "tracker_decay",
    )} == {
        "group_allocation": "adaptive", "allocation_signal": "dr_grpo", "g_min": 3, "g_max": 9,
        "unanimous": "skip", "tracker_prior_strength": 4.0, "tracker_decay": 0.5,
    }  # fmt: skip
    assert "allocation" not in key and not set(RESUME_FREE) & set(key)
    assert TrainConfig().resume_key() != key

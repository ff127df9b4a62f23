"""Every GRPOConfig keyword that comes from a training setting, at non-default values.

The settings are a real TrainConfig (asdict, as the trl backend passes it), each field away from
its default and from every other field's value, so a keyword that is dropped (falls back to its
default), read from the wrong field or swapped with another one changes the dict. The expected
dicts are written out by hand."""

from __future__ import annotations

from dataclasses import asdict

import pytest

from grpo_dial.backends.trl.config import grpo_config_kwargs
from grpo_dial.core.dial import read_arm
from grpo_dial.train.config import TrainConfig

# TRL's std (ddof 1, eps 1e-4); clip_low != clip_high so epsilon / epsilon_high cannot swap
ARM = {"preset": "grpo", "std_ddof": 1, "eps": 0.0001, "length_norm": "token",
       "clip_low": 0.15, "clip_high": 0.3}  # fmt: skip
SETTINGS = {
    "steps": 37,
    "prompts_per_step": 6,
    "group_size": 4,  # 24 completions per step
    "lr": 4e-4,
    "lr_scale": 0.25,  # learning_rate 1e-4 = lr x lr_scale
    "optimizer": "sgd",
    "weight_decay": 0.03,
    "betas": (0.8, 0.95),
    "grad_clip": 0.7,
    "max_new_tokens": 33,
    "temperature": 0.6,
    "updates_per_batch": 3,
    "kl_coef": 0.04,
    "micro_batch": 5,  # the largest divisor of a process's share that is <= 5
    "seed": 11,
    "precision": "bf16",
}
# the keywords no setting changes
FIXED = {"top_p": 1.0, "top_k": 0, "mask_truncated_completions": False,
         "lr_scheduler_type": "constant", "warmup_steps": 0,
         "importance_sampling_level": "token"}  # fmt: skip


def kwargs(processes: int, **changes) -> dict:
    dial = read_arm(ARM).dial
    return grpo_config_kwargs(dial, asdict(TrainConfig(**{**SETTINGS, **changes})), processes)


@pytest.mark.parametrize(
    ("processes", "micro", "accumulation"),
    [
        (1, 4, 6),  # share 24: divisors 1 2 3 4 6 ...; the largest <= 5 is 4; 24 / 4 = 6
        (2, 4, 3),  # share 12: largest divisor <= 5 is 4; 12 / 4 = 3
    ],
)
def test_every_setting_reaches_its_keyword(processes, micro, accumulation):
    kw = kwargs(processes)
    assert kw.pop("learning_rate") == pytest.approx(1e-4, rel=1e-12)
    assert kw == {
        **FIXED,
        "num_generations": 4,
        "per_device_train_batch_size": micro,
        "gradient_accumulation_steps": accumulation,
        "steps_per_generation": accumulation,
        "max_completion_length": 33,
        "temperature": 0.6,
        "scale_rewards": "group",
        "loss_type": "dapo",
        "epsilon": 0.15,
        "epsilon_high": 0.3,
        "beta": 0.04,
        "num_iterations": 3,
        "optim": "sgd",
        "weight_decay": 0.03,
        "adam_beta1": 0.8,
        "adam_beta2": 0.95,
        "max_grad_norm": 0.7,
        "max_steps": 37,
        "seed": 11,
        "bf16": True,
    }


def test_the_other_optimizer_precision_and_no_clipping():
    kw = kwargs(1, optimizer="adamw", precision="fp32", grad_clip=None, micro_batch=None)
    assert (kw["optim"], kw["bf16"], kw["max_grad_norm"]) == ("adamw_torch", False, 0.0)
    # no micro_batch: the whole share in one pass, no accumulation
    assert (kw["per_device_train_batch_size"], kw["gradient_accumulation_steps"]) == (24, 1)
    assert kw["steps_per_generation"] == 1

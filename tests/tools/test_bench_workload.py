"""The bench's workloads: settings checked at construction, the fixed workload's 6-token
prompts and its suppressed EOS."""

from __future__ import annotations

import pytest
import torch

from grpo_dial.data.tasks.arithmetic import ArithmeticTask
from grpo_dial.tools.bench.parity import ParityTask
from grpo_dial.tools.bench.workload import (
    EOS_SUPPRESSION,
    StepSettings,
    build_setup,
    fixed_pool,
)

TINY = {"n_layers": 1, "hidden_size": 16, "prompts": 2, "group_size": 2, "max_new_tokens": 4}


def test_bad_settings_name_the_field() -> None:
    with pytest.raises(ValueError, match="workload"):
        StepSettings(workload="long")
    with pytest.raises(ValueError, match="group_size"):
        StepSettings(group_size=1)
    with pytest.raises(ValueError, match="prompts must be an integer"):
        StepSettings(prompts=True)


def test_fixed_pool_has_five_character_prompts() -> None:
    pool = fixed_pool(ArithmeticTask(operands=2, digits=2), 16, 0)
    assert len(pool) == 64 and all(len(p.prompt) == 5 for p in pool)
    with pytest.raises(ValueError, match="five-character prompts"):
        fixed_pool(ArithmeticTask(operands=2, digits=2), 10_000, 0)


def test_fixed_setup_never_samples_eos() -> None:
    setup = build_setup(StepSettings(**TINY))
    assert isinstance(setup.task, ParityTask) and setup.eos_ids
    ids = setup.tokenizer(setup.pool[0].prompt, return_tensors="pt").input_ids
    with torch.no_grad():
        logits = setup.model(ids).logits  # (1, T, V)
    assert (logits[..., setup.eos_ids] == EOS_SUPPRESSION).all()
    others = torch.ones(logits.shape[-1], dtype=torch.bool)
    others[setup.eos_ids] = False
    assert (logits[..., others] > EOS_SUPPRESSION).all()

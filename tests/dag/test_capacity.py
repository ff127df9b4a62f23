"""The DAG build refuses asking a split for more distinct prompts than the task holds (the job
found it after the warm start and the pass rates), in one line naming the key."""

from __future__ import annotations

import pytest

from grpo_dial.dag import ConfigError
from grpo_dial.dag.inputs import check_capacity

SMOKE = {"name": "arithmetic", "options": {"operands": 2, "digits": [1, 2]}}


def test_the_smoke_tasks_splits_hold_60_and_102_prompts_at_its_weights():
    check_capacity(SMOKE, {"heldout": ("train.heldout_prompts", 60), "train": ("p", 102)})
    with pytest.raises(ConfigError, match=r"'train.heldout_prompts': 61 prompts, but the task's "
                                          r"'heldout' split holds 60 at its level weights"):
        check_capacity(SMOKE, {"heldout": ("train.heldout_prompts", 61)})
    with pytest.raises(ConfigError, match=r"'pass_rates.pool': 103 prompts, .*'train' split "
                                          r"holds 102 "):
        check_capacity(SMOKE, {"train": ("pass_rates.pool", 103)})


def test_levels_of_thousands_and_tasks_without_a_count_pass():
    check_capacity({"name": "arithmetic", "options": {"operands": 2, "digits": [2, 3]}},
                   {"heldout": ("train.heldout_prompts", 5000)})  # fmt: skip
    check_capacity({"name": "math", "options": {}}, {"heldout": ("train.heldout_prompts", 10**6)})

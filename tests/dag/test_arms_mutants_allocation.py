"""dag.arms: train.allocation's own check."""

import pytest

from grpo_dial.dag import ConfigError
from grpo_dial.dag.arms import resolve_arms


def test_no_train_allocation_and_no_arm_is_fine():
    assert resolve_arms({"train": {"max_new_tokens": 8}, "dials": {}}) == {}


def test_an_unknown_allocation_key_is_blamed_on_train_allocation():
    with pytest.raises(ConfigError, match="^config error at 'train.allocation': .*'bogus'"):
        resolve_arms({"train": {"allocation": {"bogus": 1}, "max_new_tokens": 8}, "dials": {}})

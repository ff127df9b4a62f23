"""core.dial: the messages, hash, repr and group estimator that mutation testing found unpinned
(docs/development.md#mutation-testing)."""

from __future__ import annotations

import pytest

from grpo_dial.core.dial import Dial, group_estimator, read_arm


def test_unknown_dial_key_lists_preset_first():
    with pytest.raises(ValueError) as error:
        Dial(bogus=1)
    assert str(error.value).startswith("unknown dial key 'bogus'; valid keys: preset, ")


def test_a_dial_entry_that_is_not_a_mapping_is_named_by_its_type():
    with pytest.raises(ValueError, match=r"^a dial entry must be a mapping, got list$"):
        read_arm([1, 2])


def test_equal_dials_hash_alike_and_repr_lists_fields_comma_separated():
    a, b = Dial(std_power=0.0, eps=1e-4), Dial(eps=1e-4, std_power=0.0)
    assert hash(a) == hash(b) and len({a, b}) == 1
    assert hash(a) != hash(Dial())
    text = repr(a)
    assert text.startswith("Dial(") and "std_power=0.0, " in text and "XX" not in text


def test_group_estimator_switches_off_advantage_estimators_only():
    dial = Dial(anchor="batch", strata="truncated", length_norm="lambda", std_power=0.0)
    plain = group_estimator(dial)
    assert plain.anchor == "none" and plain.strata is None
    assert plain.length_norm == "lambda" and plain.std_power == 0.0

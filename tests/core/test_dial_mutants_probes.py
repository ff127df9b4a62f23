"""core.dial: what an attribute probe gets (copy and pickle look up dunder names, and a Dial made
by `object.__new__` has no registered fields yet) and the presets' name lookup."""

from __future__ import annotations

import pytest

from grpo_dial.core.dial import PRESETS, Dial


def test_a_dunder_probe_is_an_attribute_error_naming_it():
    with pytest.raises(AttributeError) as error:
        _ = Dial().__no_such_probe__
    assert str(error.value) == "__no_such_probe__"
    assert not hasattr(Dial(), "__no_such_probe__")


def test_a_dial_not_yet_initialised_answers_a_probe_without_recursing():
    bare = object.__new__(Dial)
    with pytest.raises(AttributeError) as error:
        _ = bare.lambda_r  # a registered field, read through the missing _registered
    assert str(error.value) == "_registered"
    assert not hasattr(bare, "strata")


def test_presets_answer_membership_by_name():
    assert "dr_grpo" in PRESETS and "hadw_released" in PRESETS
    assert "no_such_recipe" not in PRESETS and 3 not in PRESETS

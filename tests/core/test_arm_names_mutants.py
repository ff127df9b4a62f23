"""core.arm_names: a second, different name for a listed arm is refused with both names."""

import pytest

from grpo_dial.core.arm_names import ARM_NAMES, add_arm_name


def test_a_different_name_for_a_named_arm_is_refused_naming_both():
    add_arm_name("grpo", ARM_NAMES["grpo"])  # the same name again: fine
    with pytest.raises(ValueError, match="^arm 'grpo' is already named 'GRPO', not 'Other'$"):
        add_arm_name("grpo", "Other")
    assert ARM_NAMES["grpo"] == "GRPO"

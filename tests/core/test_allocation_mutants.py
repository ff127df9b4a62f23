"""core.allocation: g_max may equal g_min; below it, the refusal names both."""

import pytest

from grpo_dial.core.allocation import Allocation


def test_g_max_at_least_g_min():
    assert Allocation(g_min=4, g_max=4).g_max == 4
    with pytest.raises(ValueError) as err:
        Allocation(g_min=4, g_max=3)
    assert str(err.value) == "g_max must be at least g_min = 4, got 3"

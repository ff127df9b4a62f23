"""core.checks' one-line refusals, each named and worded."""

import re

import pytest

from grpo_dial.core.checks import check_at_least, check_positive, check_real


def test_check_at_least_refuses_what_is_not_a_finite_number():
    assert check_at_least("x", 2.5, 1.0) == 2.5
    for bad in ("2", float("inf"), None, True):
        with pytest.raises(ValueError, match=r"^x must be a finite number >= 1.0, got "):
            check_at_least("x", bad, 1.0)


def test_check_positive_names_the_value_and_refuses_zero():
    assert check_positive("lr", 0.5) == 0.5
    with pytest.raises(ValueError, match=r"^lr must be a finite number > 0, got 0$"):
        check_positive("lr", 0)
    with pytest.raises(ValueError, match=r"^lr must be a finite number > 0, got -1.5$"):
        check_positive("lr", -1.5)


def test_check_real_names_the_type_and_the_interval():
    assert check_real("b", 0.25, 0.0, 1.0) == 0.25
    with pytest.raises(ValueError, match=re.escape("b must be a number, got 'x' (str)")):
        check_real("b", "x", 0.0, 1.0)
    with pytest.raises(ValueError, match=re.escape("b must be in [0.0, 1.0], got 2.0")):
        check_real("b", 2.0, 0.0, 1.0)
    with pytest.raises(ValueError, match=re.escape("b must be in [0.0, 1.0), got 1.0")):
        check_real("b", 1.0, 0.0, 1.0, high_open=True)

"""core.checks: the bound itself is admitted unless strict."""

import pytest

from grpo_dial.core.checks import check_at_least


def test_the_bound_is_admitted_unless_strict():
    assert check_at_least("x", 1.0, 1.0) == 1.0
    with pytest.raises(ValueError, match="^x must be a finite number > 1.0, got 1.0$"):
        check_at_least("x", 1.0, 1.0, strict=True)

"""core.checks: the bound itself is admitted unless strict (check_at_least) or high_open
(check_real)."""

import dataclasses

import pytest

from grpo_dial.core.checks import check_at_least, check_choice, check_int, check_real, opt


def test_the_bound_is_admitted_unless_strict():
    assert check_at_least("x", 1.0, 1.0) == 1.0
    with pytest.raises(ValueError, match="^x must be a finite number > 1.0, got 1.0$"):
        check_at_least("x", 1.0, 1.0, strict=True)


def test_check_real_admits_both_ends_unless_high_open():
    assert check_real("x", 0.0, 0.0, 1.0) == 0.0 and check_real("x", 1.0, 0.0, 1.0) == 1.0
    assert check_real("x", 0.0, 0.0, 1.0, high_open=True) == 0.0
    with pytest.raises(ValueError) as err:
        check_real("x", 1.0, 0.0, 1.0, high_open=True)
    assert str(err.value) == "x must be in [0.0, 1.0), got 1.0"
    with pytest.raises(ValueError) as err:
        check_real("x", -0.5, 0.0, 1.0)
    assert str(err.value) == "x must be in [0.0, 1.0], got -0.5"


def test_check_int_and_check_choice_refuse_with_their_line():
    with pytest.raises(ValueError) as err:
        check_int("n", 2.5, 1)
    assert str(err.value) == "n must be an integer >= 1, got 2.5"
    with pytest.raises(ValueError) as err:
        check_choice("mode", "c", ("a", "b"))
    assert str(err.value) == "mode='c' is not valid; choose one of 'a', 'b'"


def test_opt_is_a_field_with_its_default_and_help():
    @dataclasses.dataclass
    class Toy:
        k: int = opt(3, "three of them")

    (f,) = dataclasses.fields(Toy)
    assert Toy().k == 3 and f.metadata["help"] == "three of them"

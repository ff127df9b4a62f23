"""core.settings: the messages, names and schema details that mutation testing found unpinned
(`make mutate`, docs/development.md#mutation-testing)."""

from __future__ import annotations

import math
from dataclasses import dataclass, fields

import pytest

from grpo_dial.core.settings import Setting, SettingError, dataclass_settings, setting


def error_of(s: Setting, value: object) -> SettingError:
    with pytest.raises(SettingError) as error:
        s.check("x", value)
    return error.value


def test_setting_field_keeps_default_and_admits_and_dataclass_settings_reads_them():
    @dataclass
    class Two:
        a: float = setting(0.25, "help a", kind=float, low=0.0, high=1.0)
        b: int = setting(3, "help b", kind=int, low=2)
        plain: int = 7

    assert Two().a == 0.25 and Two().b == 3
    got = dataclass_settings(Two)
    assert list(got) == ["a", "b"]
    assert got["a"] == Setting(0.25, "help a", kind=float, low=0.0, high=1.0)
    assert got["b"].kind is int and got["b"].low == 2
    assert [f.name for f in fields(Two)] == ["a", "b", "plain"]


@pytest.mark.parametrize(
    ("s", "value", "line"),
    [
        (Setting(0.0, "h", kind=float), math.inf, "x must be a finite number, got inf"),
        (Setting(0.0, "h", kind=float, high=1.0), 2.0, "x must be in (-inf, 1], got 2.0"),
        (Setting(0.0, "h", kind=float, low=0.0, high=1.0, high_open=True), 1.0,
         "x must be in [0, 1), got 1.0"),
        (Setting(0.0, "h", kind=float, low=0.0, high=1.0, low_open=True), 0.0,
         "x must be in (0, 1], got 0.0"),
        (Setting(0, "h", kind=int), "a", "x must be an integer, got 'a'"),
        (Setting(0, "h", kind=int, low=0, high=4), 5, "x must be an integer in [0, 4], got 5"),
        (Setting(0.0, "h", kind=float), "1", "x must be a number, got '1' (str)"),
        (Setting(False, "h", kind=bool), 1, "x must be true or false, got 1"),
        (Setting("k", "h", kind=str), "", "x must be a name (text), got ''"),
    ],
)  # fmt: skip
def test_each_refusal_line_and_the_name_it_carries(s, value, line):
    error = error_of(s, value)
    assert str(error) == line
    assert error.name == "x"


def test_text_setting_schema_needs_one_character():
    assert Setting("k", "h", kind=str).json_schema() == {
        "type": "string",
        "minLength": 1,
        "description": "h",
    }
    assert "minLength" not in Setting(1, "h", kind=int).json_schema()

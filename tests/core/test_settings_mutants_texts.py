"""core.settings: the range words of each open or closed end, a choice's SettingError name, and
the JSON schema of a high-open range and of nullable choices, word for word."""

import pytest

from grpo_dial.core.settings import Setting, SettingError


def _line(setting, value):
    with pytest.raises(SettingError) as err:
        setting.check("k", value)
    return err.value.name, str(err.value)


def test_each_end_reads_as_it_is():
    assert _line(Setting(1.0, "h", kind=float, low=0.0, low_open=True), 0.0) == (
        "k", "k must be a finite number > 0, got 0.0")
    assert _line(Setting(1.0, "h", kind=float, low=0.0), -1.0) == (
        "k", "k must be a finite number >= 0, got -1.0")
    assert _line(Setting(1, "h", kind=int, low=1), 0) == ("k", "k must be an integer >= 1, got 0")
    assert _line(Setting(1, "h", kind=int, low=1, low_open=True), 1) == (
        "k", "k must be an integer > 1, got 1")
    assert _line(Setting(1.0, "h", kind=float, high=2.0), 3.0) == (
        "k", "k must be in (-inf, 2], got 3.0")
    assert _line(Setting(1.0, "h", kind=float, low=0.0, high=2.0, high_open=True), 2.0) == (
        "k", "k must be in [0, 2), got 2.0")
    assert Setting(1, "h", kind=int, low=0, high=None)._interval() == "[0, inf)"
    assert _line(Setting("a", "h", choices=("a", "b")), "c") == (
        "k", "k='c' is not valid; choose one of 'a', 'b'")


def test_json_schema_of_open_ends_and_nullable_choices():
    high_open = Setting(0.5, "h", kind=float, low=0.0, high=1.0, high_open=True)
    assert high_open.json_schema() == {
        "type": "number", "minimum": 0.0, "exclusiveMaximum": 1.0, "description": "h"}
    closed = Setting(0.5, "h", kind=float, high=1.0)
    assert closed.json_schema() == {"type": "number", "maximum": 1.0, "description": "h"}
    assert Setting("a", "h", choices=("a", "b"), nullable=True).json_schema() == {
        "enum": ["a", "b", None], "description": "h"}
    assert Setting("a", "h", choices=("a", "b")).json_schema() == {
        "enum": ["a", "b"], "description": "h"}

"""core.settings: one field's definition gives its check, its JSON schema and its help; the
Dial's and Allocation's fields are all such definitions, and the generated schema agrees with
the checks value by value."""

from __future__ import annotations

import math

import jsonschema
import pytest

from grpo_dial.core.allocation import ALLOCATION_SETTINGS
from grpo_dial.core.dial import Dial, dial_settings
from grpo_dial.core.settings import Setting


@pytest.mark.parametrize(
    ("setting", "good", "bad", "line"),
    [
        (Setting(0.5, "h", kind=float, low=0.0, high=1.0), [0, 0.25, 1], [-0.1, 1.01, math.nan],
         "x must be in [0, 1], got"),
        (Setting(1.0, "h", kind=float, low=0.0, low_open=True), [1e-9, 5], [0, -1, math.inf],
         "x must be a finite number > 0, got"),
        (Setting(2, "h", kind=int, low=2), [2, 9], [1, 2.0, True], "x must be an integer >= 2"),
        (Setting(None, "h", kind=int, low=1, nullable=True), [None, 1], [0, "3"], "x must be"),
        (Setting("a", "h", choices=("a", "b")), ["a", "b"], ["c", 1, None], "x='c' is not valid"),
        (Setting(0, "h", choices=(0, 1)), [0, 1], [True, 0.0, 2], "x=True is not valid"),
        (Setting(False, "h", kind=bool), [True, False], [1, "yes"], "x must be true or false"),
        (Setting(None, "h", kind=str, nullable=True), [None, "k"], ["", 3], "x must be a name"),
        (Setting(0.0, "h", kind=float), [-5.0, 3], [math.inf, -math.inf, "1"], "x must be"),
    ],
)  # fmt: skip
def test_check_and_schema_agree_on_every_value(setting, good, bad, line):
    schema = setting.json_schema()
    for value in good:
        assert setting.check("x", value) is value
        jsonschema.validate(value, schema)
    for value in bad:
        with pytest.raises(ValueError) as error:
            setting.check("x", value)
        assert "\n" not in str(error.value)
    with pytest.raises(ValueError, match=line.replace("[", r"\[").replace("(", r"\(")):
        setting.check("x", bad[0])


def test_a_range_becomes_json_schema_bounds():
    assert Setting(0.1, "eta", kind=float, low=0.0, low_open=True, high=1.0).json_schema(
        with_default=True
    ) == {"type": "number", "exclusiveMinimum": 0.0, "maximum": 1.0, "default": 0.1,
          "description": "eta"}  # fmt: skip
    assert Setting(None, "L", kind=int, low=1, nullable=True).json_schema() == {
        "type": ["integer", "null"], "minimum": 1, "description": "L"}  # fmt: skip
    assert Setting("a", "c", choices=("a", "b")).with_choices(("b", "z")).choices == ("a", "b", "z")


def test_every_dial_and_allocation_field_is_one_setting_with_help():
    settings = {**dial_settings(), **ALLOCATION_SETTINGS}
    assert {"std_power", "length_norm", "anchor_window", "lambda_r", "g_max"} <= set(settings)
    for name, spec in settings.items():
        assert len(spec.help) > 20, name
        spec.check(name, spec.default)  # each default passes its own check
    # a registered estimator's value joins a core field's choices (lambda-GRPO's 'lambda')
    assert dial_settings()["length_norm"].choices == (
        "sequence", "token", "constant", "sequence_sum", "sum", "bnpo", "lambda"
    )  # fmt: skip
    assert Dial(length_norm="lambda").length_norm == "lambda"

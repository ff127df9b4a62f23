"""One setting of the dial, of an arm's allocation, of a training run (train.config.TrainConfig)
or of a TRL launch, defined once: its default, its range or choices, and its help text. The
value check, the config schema's generated blocks (`dials`, `train`; grpo_dial.dag.schema) and
the docs all read this one definition (standard library only).

    Setting(1.0, "alpha in [0,1] ...", kind=float, low=0, high=1)
    Setting("keep", "...", choices=("keep", "drop"))

A range is [low, high], either end open with low_open / high_open; an integer is a whole number
and never a bool; `nullable` admits None. `check` raises SettingError (a ValueError) with one
line naming the setting and the value, and returns the value unchanged.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from numbers import Integral

_JSON_TYPES = {float: "number", int: "integer", str: "string", bool: "boolean"}


class SettingError(ValueError):
    """A value a Setting does not admit, in one line; `name` is the setting's (the key)."""

    def __init__(self, name: str, message: str) -> None:
        super().__init__(message)
        self.name = name


@dataclass(frozen=True)
class Setting:
    """A dial or allocation field: default, help, and the values it admits (range or choices)."""

    default: object
    help: str
    kind: type | None = None  # float, int, str or bool; None with choices
    low: float | None = None
    high: float | None = None
    low_open: bool = False
    high_open: bool = False
    choices: tuple = ()
    nullable: bool = False

    def check(self, name: str, value: object) -> object:
        """`value` when this setting admits it, else ValueError naming `name` and the value."""
        if value is None and self.nullable:
            return value
        if self.choices:
            if value not in self.choices or type(value) not in {type(c) for c in self.choices}:
                options = ", ".join(map(repr, self.choices))
                raise SettingError(name, f"{name}={value!r} is not valid; choose one of {options}")
            return value
        if self.kind is bool:
            if not isinstance(value, bool):
                raise SettingError(name, f"{name} must be true or false, got {value!r}")
            return value
        if self.kind is str:
            if not isinstance(value, str) or not value:
                raise SettingError(name, f"{name} must be a name (text), got {value!r}")
            return value
        integer = f"{name} must be an integer{self._range_text()}, got {value!r}"
        if self.kind is int and (isinstance(value, bool) or not isinstance(value, Integral)):
            raise SettingError(name, integer)
        if isinstance(value, bool) or not isinstance(value, int | float) or math.isnan(value):
            kind = type(value).__name__
            raise SettingError(name, f"{name} must be a number, got {value!r} ({kind})")
        if not self._in_range(value):
            if self.kind is int:
                raise SettingError(name, integer)
            raise SettingError(name, f"{name} must be {self._range_words()}, got {value!r}")
        return value

    def _range_words(self) -> str:
        """'in [0, 1]', or '> 0' / '>= 2' for a range open above (a finite number)."""
        if self.low is not None and self.high is None:
            return f"a finite number {'>' if self.low_open else '>='} {self.low:g}"
        if self.low is None and self.high is None:
            return "a finite number"
        return f"in {self._interval()}"

    def _in_range(self, v: float) -> bool:
        low = -math.inf if self.low is None else self.low
        high = math.inf if self.high is None else self.high
        above = v > low if self.low_open or self.low is None else v >= low
        below = v < high if self.high_open or self.high is None else v <= high
        return above and below

    def _interval(self) -> str:
        low = "-inf" if self.low is None else f"{self.low:g}"
        high = "inf" if self.high is None else f"{self.high:g}"
        left = "(" if self.low_open or self.low is None else "["
        right = ")" if self.high_open or self.high is None else "]"
        return f"{left}{low}, {high}{right}"

    def _range_text(self) -> str:
        if self.low is not None and self.high is None:
            return f" {'>' if self.low_open else '>='} {self.low:g}"
        return "" if self.low is None else f" in {self._interval()}"

    def with_choices(self, extra: tuple) -> Setting:
        """This setting admitting `extra` choices too (a registered estimator's own values)."""
        return replace(self, choices=(*self.choices, *(c for c in extra if c not in self.choices)))

    def json_schema(self, *, with_default: bool = False) -> dict:
        """The JSON schema of this setting (snakemake's validate reads it at DAG build)."""
        out: dict = {}
        if self.choices:
            out["enum"] = [*self.choices, *([None] if self.nullable else [])]
        else:
            kind = _JSON_TYPES[self.kind]
            out["type"] = [kind, "null"] if self.nullable else kind
            if kind == "string":
                out["minLength"] = 1
            if self.low is not None:
                out["exclusiveMinimum" if self.low_open else "minimum"] = self.low
            if self.high is not None:
                out["exclusiveMaximum" if self.high_open else "maximum"] = self.high
        if with_default:
            out["default"] = self.default
        out["description"] = self.help
        return out


def setting(default: object, text: str, **admits: object) -> object:
    """A dataclass field defined by one Setting (kept in the field's metadata)."""
    return field(default=default, metadata={"setting": Setting(default, text, **admits)})


def check_settings(instance: object) -> None:
    """Run every field's Setting check on a dataclass instance (its __post_init__ calls this)."""
    from dataclasses import fields

    for f in fields(instance):
        if "setting" in f.metadata:
            f.metadata["setting"].check(f.name, getattr(instance, f.name))


def dataclass_settings(cls: type) -> dict[str, Setting]:
    """Field name -> Setting of a dataclass whose fields were made with `setting`."""
    from dataclasses import fields

    return {f.name: f.metadata["setting"] for f in fields(cls) if "setting" in f.metadata}

"""The small checks every settings dataclass runs on its fields, in one place (standard library).

Each raises ValueError with one line naming the field and the value; none returns anything but
the checked value. `opt` is a dataclass field with its help text (the schema and docs read it).
"""

from __future__ import annotations

import math
from dataclasses import field
from numbers import Integral


def opt(default: object, text: str) -> object:
    """A dataclass field with a default and its help text."""
    return field(default=default, metadata={"help": text})


def is_real(v: object) -> bool:
    """A finite int or float (a bool is not a number here)."""
    return not isinstance(v, bool) and isinstance(v, int | float) and math.isfinite(v)


def check_int(name: str, v: object, lo: int) -> int:
    """An integer (numpy's too, never a bool) >= lo."""
    if isinstance(v, bool) or not isinstance(v, Integral) or v < lo:
        raise ValueError(f"{name} must be an integer >= {lo}, got {v!r}")
    return int(v)


def check_real(name: str, v: object, lo: float, hi: float, high_open: bool = False) -> float:
    """A number in [lo, hi] (or [lo, hi) with high_open)."""
    if isinstance(v, bool) or not isinstance(v, int | float) or math.isnan(v):
        raise ValueError(f"{name} must be a number, got {v!r} ({type(v).__name__})")
    if not (lo <= v < hi if high_open else lo <= v <= hi):
        raise ValueError(f"{name} must be in [{lo}, {hi}{')' if high_open else ']'}, got {v!r}")
    return v


def check_at_least(name: str, v: object, lo: float, strict: bool = False) -> float:
    """A finite number >= lo (> lo with strict)."""
    if not is_real(v) or (v <= lo if strict else v < lo):
        raise ValueError(
            f"{name} must be a finite number {'>' if strict else '>='} {lo}, got {v!r}"
        )
    return v


def check_positive(name: str, v: object) -> float:
    """A finite number > 0."""
    return check_at_least(name, v, 0, strict=True)


def check_choice(name: str, v: object, choices: tuple) -> object:
    """One of `choices`, of the same type (so True is not 1 and 1 is not True)."""
    if v not in choices or type(v) not in {type(c) for c in choices}:
        raise ValueError(
            f"{name}={v!r} is not valid; choose one of {', '.join(map(repr, choices))}"
        )
    return v

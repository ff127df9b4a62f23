"""The Dial's core fields are declared dataclass fields (what a type checker reads), each defined
once by its Setting; a registered estimator's fields ride beside them, and a Dial stays a frozen,
hashable, picklable value whichever way it is copied."""

from __future__ import annotations

import copy
import dataclasses
import pickle
import typing

import pytest

from grpo_dial.core.dial import CORE_SETTINGS, Dial, dial_settings, preset
from grpo_dial.core.estimators import ESTIMATORS


def test_the_core_fields_are_declared_with_types_matching_their_settings():
    declared = [f.name for f in dataclasses.fields(Dial) if f.name != "_registered"]
    assert declared == list(CORE_SETTINGS) == list(dial_settings())[: len(CORE_SETTINGS)]
    hints = typing.get_type_hints(Dial)
    for name, spec in CORE_SETTINGS.items():
        kinds = set(typing.get_args(hints[name])) or {hints[name]}
        if spec.choices and hints[name] is str:  # estimators add values (length_norm)
            assert all(isinstance(c, str) for c in dial_settings()[name].choices), name
        elif spec.choices:  # a Literal of the choices
            assert set(typing.get_args(hints[name])) == set(spec.choices), name
        else:
            assert spec.kind in kinds and (type(None) in kinds) == spec.nullable, name
        assert getattr(Dial(), name) == spec.default


def test_registered_fields_are_fields_of_the_value():
    registered = [name for est in ESTIMATORS.values() for name in est.fields]
    assert registered and list(Dial().as_dict()) == [*CORE_SETTINGS, *registered]
    dial = preset("lambda_grpo").replace(std_power=0.5)
    name = registered[0]
    assert getattr(dial, name) == dial.as_dict()[name]
    for other in (
        pickle.loads(pickle.dumps(dial)),
        copy.deepcopy(dial),
        dataclasses.replace(dial),  # carries the registered fields too
        Dial(**dial.as_dict()),
    ):
        assert other == dial and hash(other) == hash(dial) and other.as_dict() == dial.as_dict()
    moved = dataclasses.replace(dial, clip_high=0.28)
    assert moved == dial.replace(clip_high=0.28) != dial
    assert moved.length_norm == "lambda"
    with pytest.raises(AttributeError, match="frozen"):
        dial.lambda_value = 1.0
    with pytest.raises(AttributeError, match="has no field 'nope'"):
        _ = dial.nope
    with pytest.raises(ValueError, match="std_power must be in"):
        dataclasses.replace(dial, std_power=2.0)  # checked like any other

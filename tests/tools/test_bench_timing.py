"""Per-step timings: the summary over timed steps, and phase timers that add up and restore."""

from __future__ import annotations

import math
import time
import types

import pytest

from grpo_dial.tools.bench.timing import SideTimes, timed, wrap_method


def test_summary_of_timed_steps() -> None:
    t = SideTimes(
        total=[1.0, 3.0, 2.0], generation=[0.5, 1.0, 0.5], scoring=[0.1] * 3, tokens=[10, 20, 30]
    )
    s = t.summary()
    assert s["s_per_step_median"] == 2.0 and s["s_per_step_min"] == 1.0
    assert s["tokens_per_s"] == pytest.approx(60 / 6.0)
    assert s["training_s"] == pytest.approx(1.4)  # median of 0.4, 1.9, 1.4
    assert math.isnan(s["peak_mib"]) and s["informative_rows"] is None


def test_add_keeps_informative_rows_only_when_given() -> None:
    t = SideTimes()
    t.add({"total": 1.0, "generation": 0.5, "scoring": 0.1, "tokens": 8, "informative": 0.5})
    t.add({"total": 2.0, "generation": 0.5, "scoring": 0.1, "tokens": 8, "informative": 1.0})
    trl = SideTimes()
    trl.add({"total": 1.0, "generation": 0.5, "scoring": 0.1, "tokens": 8})
    assert t.summary()["informative_rows"] == 0.75 and t.summary()["tokens_per_step"] == 8
    assert trl.summary()["informative_rows"] is None


def test_timed_adds_every_call_and_restores_the_function() -> None:
    def nap(x):
        time.sleep(0.01)
        return 2 * x

    module = types.SimpleNamespace(nap=nap)
    sink: dict[str, float] = {}
    with timed(module, "nap", sink):
        assert module.nap(3) == 6 and module.nap(4) == 8
    assert module.nap is nap
    assert sink["nap"] >= 0.02


def test_timed_counts_a_call_that_raises() -> None:
    def fail():
        time.sleep(0.01)
        raise RuntimeError("boom")

    obj = types.SimpleNamespace(fail=fail)
    sink: dict[str, float] = {}
    wrap_method(obj, "fail", lambda: sink)
    with pytest.raises(RuntimeError, match="boom"):
        obj.fail()
    assert sink["fail"] >= 0.01

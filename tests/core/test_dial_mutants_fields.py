"""core.dial: an arm's resolved fields and back, and the backend's refusal."""

import pytest

from grpo_dial.core.allocation import Allocation
from grpo_dial.core.dial import Arm, Dial, arm_fields, arm_from_fields, read_arm


def test_an_arm_round_trips_through_its_fields():
    arm = Arm(Dial().replace(eps=0.25, std_power=0.5), Allocation(g_min=3, g_max=9), "trl")
    fields = arm_fields(arm)
    assert set(fields) == {"dial", "allocation", "backend"}
    assert fields["backend"] == "trl" and fields["allocation"]["g_max"] == 9
    assert arm_from_fields(fields) == arm
    assert arm_from_fields({k: v for k, v in fields.items() if k != "backend"}).backend == "own"


def test_a_bad_backend_is_refused_by_its_key():
    fields = arm_fields(Arm(Dial(), Allocation(), "own"))
    with pytest.raises(ValueError, match="^backend='x' is not valid; choose one of "):
        arm_from_fields({**fields, "backend": "x"})
    with pytest.raises(ValueError, match="backend='x' is not valid; choose one of "):
        read_arm({"preset": "grpo", "backend": "x"})

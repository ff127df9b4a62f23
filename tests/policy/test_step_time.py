"""The step-time model: the module docstring's sums by hand, the untied embedding, refusals."""

from __future__ import annotations

import pytest

from grpo_dial.policy.memory import KNOWN, Shape
from grpo_dial.policy.step_time import DEVICES, Device, matmul_params, step_seconds


def test_a_smollm2_step_by_hand():
    device = Device("test", flops=2e11, call_s=0.03)
    t = step_seconds(KNOWN["smollm2"], prompts=8, group_size=8, prompt=38, mean_response=7.5,
                     longest=13, device=device)  # fmt: skip
    tokens = 8 * 38 + 64 * 7.5  # M P + R T: a prompt's tokens once for its group = 784
    assert t.generation == pytest.approx(2 * 134_515_008 * tokens / 2e11 + 13 * 0.03, rel=1e-12)
    assert t.update == pytest.approx(6 * 134_515_008 * tokens / 2e11, rel=1e-12)
    assert t.total == pytest.approx(8 * 134_515_008 * tokens / 2e11 + 0.39, rel=1e-12)
    assert t.update == pytest.approx(3.1638, abs=1e-4)  # 6 x 134,515,008 x 784 / 2e11


def test_an_untied_embedding_is_a_lookup_and_a_tied_one_the_head():
    tied = Shape(2, 8, 2, 1, 4, 16, 100, 5000, True)
    untied = Shape(2, 8, 2, 1, 4, 16, 100, 5800, False)
    assert matmul_params(tied) == 5000 and matmul_params(untied) == 5800 - 800
    one = Device("one", flops=1.0, call_s=0.0)
    assert step_seconds(untied, 1, 1, 1, 0, 0, one).update == 6 * 5000
    assert step_seconds(untied, 2, 3, 5, 1, 0, one).update == 6 * 5000 * (2 * 5 + 6 * 1)


@pytest.mark.parametrize("field", ["prompts", "group_size", "prompt", "mean_response", "longest"])
def test_negative_counts_are_refused_in_one_line(field):
    args = {"prompts": 2, "group_size": 4, "prompt": 10, "mean_response": 3, "longest": 5,
            field: -1}  # fmt: skip
    with pytest.raises(ValueError, match=rf"^{field} must be a number >= 0, got -1$"):
        step_seconds(KNOWN["smollm2"], device=DEVICES["h100"], **args)
    with pytest.raises(ValueError, match=rf"^{field} must be a number >= 0, got '4'$"):
        step_seconds(KNOWN["smollm2"], device=DEVICES["h100"], **{**args, field: "4"})
    with pytest.raises(ValueError, match=r"^device 'x': flops must be > 0"):
        Device("x", flops=0.0, call_s=0.1)

"""Wall seconds of a training step, predicted from the model's shape, the step's token counts and
two numbers of the device.

A step of M prompts of P tokens, each sampled G times (R = M G rows), responses of mean T and
longest L tokens; a prompt's tokens are forwarded once for its whole group (the sampler's
prefill and the log-prob forward share them, policy/rollout), so a pass covers M P + R T tokens:

  generation  the prefill and L decode calls of R tokens each: 2 N (M P + R T) FLOPs, and at
              least `call_s` per decode call (a call's kernels run one after another, so a small
              model at small R waits on launches, not on arithmetic)
  update      the log-prob forward and backward of the same tokens: 6 N (M P + R T) FLOPs
              (forward 2 N, backward 4 N a token)

  seconds = 8 N (M P + R T) / flops + L call_s

N counts the weights a token's forward multiplies: every parameter, the output head included and
an untied embedding's lookup left out. `flops` is the rate the device reaches on these matmuls
(not its peak); both numbers are per device (DEVICES: fitted on this project's CPU, assumed on
a GPU).
"""

from __future__ import annotations

from dataclasses import dataclass

from grpo_dial.policy.memory import Shape


@dataclass(frozen=True)
class Device:
    """A device's effective matmul rate (FLOP/s) and its floor per decode call (s)."""

    name: str
    flops: float
    call_s: float

    def __post_init__(self) -> None:
        if not (self.flops > 0 and self.call_s >= 0):
            raise ValueError(f"device {self.name!r}: flops must be > 0 and call_s >= 0")


DEVICES = {
    # one core of this project's CPU machine, fp32: fitted to the SmolLM2 pilot's training steps
    # (17.8 CPU seconds a step of 8 prompts x 8, docs/performance.md#step-time), a decode
    # call's floor assumed
    "cpu1": Device("one CPU core, fp32", 4.8e10, 0.02),
    # one H100 in fp32 without TF32 (torch's default for matmuls): 40 % of its 67 TFLOP/s, and
    # 30 layers x ~12 kernels x ~12 us of launches a decode call; assumed, not measured
    "h100": Device("one H100, fp32", 2.7e13, 0.005),
}


def matmul_params(shape: Shape) -> int:
    """N: the parameters a token's forward multiplies (an untied embedding is a lookup)."""
    return shape.params - (0 if shape.tied else shape.vocab * shape.hidden)


@dataclass(frozen=True)
class StepTime:
    """Predicted seconds of one step: generation and update."""

    generation: float
    update: float

    @property
    def total(self) -> float:
        return self.generation + self.update


def step_seconds(shape: Shape, prompts: int, group_size: int, prompt: float,
                 mean_response: float, longest: int, device: Device) -> StepTime:  # fmt: skip
    """The module docstring's step: M = prompts, G = group_size, P = prompt, T = mean_response,
    L = longest."""
    for name, v in (("prompts", prompts), ("group_size", group_size), ("prompt", prompt),
                    ("mean_response", mean_response), ("longest", longest)):  # fmt: skip
        if isinstance(v, bool) or not isinstance(v, int | float) or not v >= 0:
            raise ValueError(f"{name} must be a number >= 0, got {v!r}")
    tokens = prompts * prompt + prompts * group_size * mean_response
    n = matmul_params(shape)
    return StepTime(
        generation=2 * n * tokens / device.flops + longest * device.call_s,
        update=6 * n * tokens / device.flops,
    )

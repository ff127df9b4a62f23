"""Wall seconds of a training step, predicted from the model's shape, the step's token counts and
two numbers of the device.

A step of R rows, prompts of P tokens and responses of mean T and longest L tokens:

  generation  a prefill of R P tokens and L decode calls of R tokens each: 2 N R (P + T) FLOPs,
              and at least `call_s` per decode call (a call's kernels run one after another,
              so a small model at small R waits on launches, not on arithmetic)
  update      the log-prob forward and backward of the R (P + T) tokens: 6 N R (P + T) FLOPs
              (forward 2 N, backward 4 N a token)

  seconds = 8 N R (P + T) / flops + L call_s

N counts the weights a token's forward multiplies: every parameter, the output head included and
an untied embedding's lookup left out. `flops` is the rate the device reaches on these matmuls
(not its peak); both numbers are per device (DEVICES: measured on CPU, assumed on a GPU).
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
    # 2 shared cores of this project's CPU machine, fp32: the forward and backward of 64 rows x
    # 48 tokens of SmolLM2-135M (21.4 s, 8.3e13 FLOP... per docs/length-bias.md's pilot), and a
    # decode call of 64 rows
    "cpu2": Device("2 CPU cores, fp32", 1.2e11, 0.05),
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


def step_seconds(shape: Shape, rows: int, prompt: float, mean_response: float, longest: int,
                 device: Device) -> StepTime:  # fmt: skip
    """The module docstring's step: R = rows, P = prompt, T = mean_response, L = longest."""
    for name, v in (("rows", rows), ("prompt", prompt), ("mean_response", mean_response),
                    ("longest", longest)):  # fmt: skip
        if isinstance(v, bool) or not v >= 0:
            raise ValueError(f"{name} must be a number >= 0, got {v!r}")
    tokens = rows * (prompt + mean_response)
    n = matmul_params(shape)
    return StepTime(
        generation=2 * n * tokens / device.flops + longest * device.call_s,
        update=6 * n * tokens / device.flops,
    )

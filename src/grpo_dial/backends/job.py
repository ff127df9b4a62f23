"""One train job as every backend receives it: the resolved arm, the base model, the task, the
run's settings, where its tables go and where it checkpoints (no torch at import)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from grpo_dial.core.dial import Arm


@dataclass(frozen=True)
class Job:
    """One arm and seed to train. task: the config's `task:` spec ({name, options});
    config: a train.config.TrainConfig; launch: train.trl (how a TRL run is launched)."""

    arm: Arm
    base: str  # the base model's directory or hub id
    task: Mapping[str, Any]
    config: Any
    outputs: Mapping[str, Any]  # table name -> path, "model" -> the final policy's directory
    checkpoint_dir: str
    pass_rates: Any = None  # the base policy's pass-rate table (difficulty bands), or None
    pass_rates_path: str | None = None  # its file, for a job launched in other processes
    launch: Mapping[str, Any] = field(default_factory=dict)

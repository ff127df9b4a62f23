"""train.trl's keys, each defined once (default, range, help): `TrlLaunch`. The config schema's
train.trl block is generated from it (grpo_dial.dag.schema), and `launch_settings` fills a partial
mapping from it (the launcher and the trainer both read it). No torch at import."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass

from grpo_dial.core.settings import check_settings, setting


@dataclass(frozen=True)
class TrlLaunch:
    """How a trl-backend train job is launched: the config's train.trl (docs/backends.md)."""

    gpus: int = setting(
        1,
        "GPUs one TRL run spans (accelerate launch --num_processes); the job asks its profile "
        "for this many (resource gpu). Ignored on the CPU.",
        kind=int, low=1,
    )  # fmt: skip
    processes: int = setting(
        1,
        "CPU processes one TRL run spans (torch.distributed over gloo, accelerate launch "
        "--multi_gpu --num_processes N on the CPU), sharing the job's threads; give the job as "
        "many CPUs (cpus_per_task). Ignored on CUDA (gpus).",
        kind=int, low=1,
    )  # fmt: skip
    accelerate_config: str | None = setting(
        None,
        "An accelerate config file for GPU runs, e.g. config/accelerate/zero2.yaml or "
        "zero3.yaml (DeepSpeed ZeRO-2 / ZeRO-3, for a model whose optimizer state does not fit "
        "one GPU); null = plain data parallel.",
        kind=str, nullable=True,
    )  # fmt: skip
    vllm: str = setting(
        "auto",
        "auto = vLLM colocate generation when vllm is installed and the device is CUDA (faster "
        "sampling); off = generate with transformers (the own backend's sampler).",
        choices=("auto", "off"),
    )  # fmt: skip
    vllm_gpu_memory_utilization: float = setting(
        0.3,
        "Share of each GPU's memory vLLM may take in colocate mode; raise it when the policy "
        "and its optimizer leave room, lower it on an out-of-memory error.",
        kind=float, low=0.0, low_open=True, high=1.0,
    )  # fmt: skip

    def __post_init__(self) -> None:
        check_settings(self)


def launch_settings(trl: Mapping | None) -> dict:
    """train.trl with every key it leaves out at TrlLaunch's default, each value checked."""
    return asdict(TrlLaunch(**(trl or {})))

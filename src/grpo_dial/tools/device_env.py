"""What the device check's probes share: the device, its clock and memory, the shapes to measure,
and a SmolLM2-shaped model with random weights built from the shipped config.json.

Memory is CUDA's caching allocator's (`torch.cuda.max_memory_allocated` since a reset, minus what
was allocated at the reset); off CUDA every memory field is None with the reason `CUDA_ONLY`.
Times are wall seconds between two device synchronizations. The shapes (`Shapes`) are
config/gpu.yaml's: the update's micro-batches of prompts_per_step x G rows of up to
max_new_tokens after prompts of up to PROMPT_LEN tokens (the memory model's planning length), the
training sampler's generation_batch rows and the pass-rate sampler's prompts_per_batch x samples;
`--tiny` replaces them by a shape that runs on a laptop CPU in seconds.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

import torch

CONFIG_JSON = Path(__file__).with_name("smollm2_135m_config.json")  # no weights travel
PROMPT_LEN = 256  # the longest prompt the memory model plans for (policy.memory.plan_config)
# --tiny: SmolLM2's head layout (9:3 -> 3:1 grouped heads of width 64) at 2 layers, 256 tokens
TINY_MODEL = {
    "num_hidden_layers": 2, "hidden_size": 192, "num_attention_heads": 3,
    "num_key_value_heads": 1, "intermediate_size": 512, "vocab_size": 256,
}  # fmt: skip
MIB, GIB = 2**20, 2**30


def cuda_only(device: str) -> str:
    return f"CUDA-only (torch.cuda memory statistics); this run's device is {device}"


def one_line(error: BaseException) -> str:
    """`Type: first line of the message`, at most 300 characters."""
    text = str(error).strip().splitlines()
    line = f"{type(error).__name__}: {text[0] if text else ''}".rstrip(": ")
    return line[:300]


def put(out: dict, key: str, value, why: str | None = None) -> None:
    """out[key] = value; a None value gets its reason in out["null"][key]."""
    out[key] = value
    if value is None:
        out.setdefault("null", {})[key] = why or "not measured"


class Device:
    """A torch device with a synchronizing clock and peak-memory readings (CUDA only). A
    numbered GPU (cuda:N) becomes the current device, and every reading names it, so the
    numbers are that GPU's, not cuda:0's."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.device = torch.device(name)
        self.type = self.device.type
        self.cuda = self.type == "cuda"
        if self.cuda and self.device.index is not None:
            torch.cuda.set_device(self.device)

    def sync(self) -> None:
        if self.cuda:
            torch.cuda.synchronize(self.device)

    def start(self) -> int:
        """Synchronize, reset the peak statistic; the bytes allocated now (0 off CUDA)."""
        self.sync()
        if not self.cuda:
            return 0
        torch.cuda.reset_peak_memory_stats(self.device)
        return torch.cuda.memory_allocated(self.device)

    def max_allocated(self) -> int:
        """Peak bytes allocated on this device since the last `start`."""
        return int(torch.cuda.max_memory_allocated(self.device))

    def peak(self, base: int) -> int | None:
        """Peak bytes allocated since `start` above `base`; None off CUDA."""
        self.sync()
        return self.max_allocated() - base if self.cuda else None

    def free(self) -> None:
        """Collect garbage and return cached blocks to the driver between measurements (CUDA
        only: elsewhere nothing is measured that it would change)."""
        import gc

        if self.cuda:
            gc.collect()
            torch.cuda.empty_cache()

    def timed(self, fn: Callable[[], object]) -> tuple[float, int | None, object]:
        """(wall seconds, peak bytes above the start, fn's result) of one call."""
        base = self.start()
        t0 = time.perf_counter()
        result = fn()
        self.sync()
        return time.perf_counter() - t0, self.peak(base), result


def mib(x: float | None) -> float | None:
    return None if x is None else round(x / MIB, 1)


def gib(x: float | None) -> float | None:
    return None if x is None else round(x / GIB, 3)


def ratio(a: float | None, b: float | None) -> float | None:
    return None if a is None or not b else round(a / b, 3)


def smollm2_config(tiny: bool = False):
    """SmolLM2-135M's LlamaConfig from the shipped config.json (TINY_MODEL's widths with
    tiny), sdpa attention as the trainer loads it."""
    from transformers import LlamaConfig

    fields = json.loads(CONFIG_JSON.read_text())
    fields.pop("architectures", None)
    fields.pop("model_type", None)
    if tiny:
        fields.update(TINY_MODEL)
    config = LlamaConfig(**fields)
    config._attn_implementation = "sdpa"
    return config


def smollm2_model(device: Device, tiny: bool = False, seed: int = 0):
    """A LlamaForCausalLM of `smollm2_config` with random weights (seeded), fp32, eval mode,
    initialized directly on the device."""
    from transformers import LlamaForCausalLM

    config = smollm2_config(tiny)
    index = torch.device(device.name).index or 0
    with torch.random.fork_rng(devices=[index] if device.cuda else []):
        torch.manual_seed(seed)
        with torch.device(device.name):
            model = LlamaForCausalLM(config)
    return model.float().eval()


@dataclass(frozen=True)
class Shapes:
    """What is measured, from config/gpu.yaml (or `tiny`)."""

    prompts_per_step: int
    group_size: int
    max_new_tokens: int
    prompt_len: int
    micro_batches: tuple[int, int]
    generation_batch: int
    passrate_rows: int
    passrate_group: int
    passrate_new_tokens: int
    alive_every: tuple[int, ...]
    precision: str
    tiny: bool

    @property
    def rows(self) -> int:
        return self.prompts_per_step * self.group_size

    @classmethod
    def of(cls, config: Mapping, tiny: bool) -> Shapes:
        """config/gpu.yaml's train and pass_rates sections: micro_batch and 4 x micro_batch
        (the 80 GB setting its comment names), alive_check_every 1, its value and 4 x."""
        if tiny:
            return cls(2, 4, 12, 16, (2, 4), 8, 8, 4, 8, (1, 4), "bf16", True)  # as on the GPU
        train, rates = config["train"], config["pass_rates"]
        mb = int(train.get("micro_batch") or train["prompts_per_step"] * train["group_size"])
        every = int(train.get("alive_check_every", 8))
        return cls(
            int(train["prompts_per_step"]), int(train["group_size"]),
            int(train["max_new_tokens"]), PROMPT_LEN, (mb, 4 * mb),
            int(train.get("generation_batch") or train["prompts_per_step"] * train["group_size"]),
            int(rates["prompts_per_batch"]) * int(rates["samples"]), int(rates["samples"]),
            int(rates["max_new_tokens"]), tuple(sorted({1, every, 4 * every})),
            str(train.get("precision", "fp32")), False,
        )  # fmt: skip


def merged_config(path: Path, repo: Path) -> dict:
    """config/config.yaml with `path` layered over it (what `snakemake --configfile` sees;
    grpo_dial.dag.config_files)."""
    from grpo_dial.dag.config_files import layered_config

    return layered_config([repo / "config" / "config.yaml", path])

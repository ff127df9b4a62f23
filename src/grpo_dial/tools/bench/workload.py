"""The bench's step workloads: one model, tokenizer, task and prompt pool that both sides share.

- fixed: a 2-layer, 128-wide Llama over a 32-symbol character tokenizer, 16 prompts x G = 8,
  6-token prompts (bos + 5 characters), exactly 24 new tokens (EOS suppressed: a forward hook
  on the output head sets the EOS logits to -1e4 on both sides, so no response finishes),
  temperature 1, beta 0, one AdamW step per batch (lr 1e-4, clip 1.0), fp32; reward 1 iff the
  response holds an odd number of digits (grpo_dial.tools.bench.parity: groups stay
  informative, so every row has a gradient on both sides).
- free: the embedded arithmetic task with free-length responses (at most 64 new tokens) from a
  warm-started policy (results/policy/base when present, else a 2 x 128 Llama warm-started here
  for `warm_start_steps`); most responses end well before the limit.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from grpo_dial.tools.bench.parity import ParityTask

WORKLOADS = ("fixed", "free")
FIXED_ALPHABET = "0123456789+=;#chkabdefgijlmnopq"[:28]  # 28 characters + 4 specials = 32
EOS_SUPPRESSION = -1e4  # exp(-1e4 - max) == 0 in float32: EOS is never sampled


@dataclass(frozen=True)
class StepSettings:
    """One step workload: batch shape, sampling and optimizer, identical for both sides."""

    workload: str = "fixed"
    prompts: int = 16
    group_size: int = 8
    max_new_tokens: int = 24
    temperature: float = 1.0
    lr: float = 1e-4
    grad_clip: float = 1.0
    n_layers: int = 2
    hidden_size: int = 128
    seed: int = 0
    policy: str | None = None  # free: a saved policy directory; None = results/policy/base or warm
    warm_start_steps: int = 300
    device: str = "cpu"

    def __post_init__(self) -> None:
        if self.workload not in WORKLOADS:
            raise ValueError(f"workload={self.workload!r} is not valid; choose one of {WORKLOADS}")
        for name in ("prompts", "group_size", "max_new_tokens", "n_layers", "hidden_size"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"{name} must be an integer >= 1, got {v!r}")
        if self.group_size < 2:
            raise ValueError(f"group_size must be >= 2 (TRL needs 2), got {self.group_size}")


@dataclass
class Setup:
    """What both sides share: the model (one copy each), tokenizer, task and prompt pool."""

    model: object
    tokenizer: object
    task: object
    pool: list
    eos_ids: list[int]


def fixed_pool(task, n: int, seed: int) -> list:
    """Arithmetic train problems whose prompt has exactly 5 characters (bos + 5 = 6 tokens)."""
    problems = task.problems("train", 900, seed)
    pool = [p for p in problems if len(p.prompt) == 5]
    if len(pool) < n:
        raise ValueError(f"only {len(pool)} five-character prompts for {n} needed")
    return pool[: max(n, 64)]


def suppress_eos(model, eos_ids: list[int]) -> None:
    """Forward hook on the output head: EOS logits -> -1e4 (never sampled, finite entropy)."""
    import torch

    idx = torch.tensor(eos_ids)

    def hook(_module, _inputs, logits):
        return logits.index_fill(-1, idx.to(logits.device), EOS_SUPPRESSION)

    model.get_output_embeddings().register_forward_hook(hook)


def build_setup(settings: StepSettings, progress: bool = False) -> Setup:
    """The workload's model, tokenizer, task and pool (see the module docstring)."""
    from grpo_dial.data.tasks.arithmetic import ArithmeticTask
    from grpo_dial.policy.model import (
        PolicySpec,
        build_char_tokenizer,
        build_tiny_llama,
        load_policy,
    )
    from grpo_dial.policy.rollout import eos_ids

    task = ArithmeticTask()
    spec = PolicySpec(
        n_layers=settings.n_layers,
        hidden_size=settings.hidden_size,
        n_heads=4 if settings.hidden_size % 4 == 0 else 1,
        intermediate_size=3 * settings.hidden_size,
    )
    if settings.workload == "fixed":
        tokenizer = build_char_tokenizer(FIXED_ALPHABET)
        model = build_tiny_llama(spec, tokenizer, settings.seed)
        pool = fixed_pool(ArithmeticTask(operands=2, digits=2), settings.prompts, settings.seed)
        task = ParityTask(task)
        eos = eos_ids(model, tokenizer)
        suppress_eos(model, eos)
    else:
        path = settings.policy
        if path is None and Path("results/policy/base/config.json").exists():
            path = "results/policy/base"
        if path is not None:
            model, tokenizer = load_policy(path, settings.device, "float32")
        else:
            from grpo_dial.policy.warm_start import WarmStartConfig, warm_start

            tokenizer = build_char_tokenizer(task.alphabet)
            model = build_tiny_llama(spec, tokenizer, settings.seed)
            cfg = WarmStartConfig(
                steps=settings.warm_start_steps,
                warmup_steps=min(50, settings.warm_start_steps // 4),
                progress=progress,
            )
            warm_start(task, model, tokenizer, cfg)
        pool = task.problems("train", 256, 0)
        eos = eos_ids(model, tokenizer)
    model = model.to(settings.device).float().eval()
    return Setup(model, tokenizer, task, pool, eos)

"""Forced response prefixes: text the task writes at the start of a response (tasks/aware.py).

A task with a `response_prefix(problem, rng) -> str` method draws, per response, the first
characters of that response. The sampler writes them in place of its own draws (the policy sees
them in its context, as if it had sampled them) and the update gives them weight 0, so no
gradient moves their probability; they still count in |o|, the normalizers' length. Tasks
without the method are untouched (no draw, no forcing).
"""

from __future__ import annotations

import numpy as np
import torch
from torch import Tensor

from grpo_dial.data.tasks.base import Problem


def has_prefix(task: object) -> bool:
    return callable(getattr(task, "response_prefix", None))


def draw_prefixes(
    task: object, problems: list[Problem], counts: list[int] | int, rng: np.random.Generator
) -> list[str] | None:
    """One prefix per response row (problem j repeated counts[j] times, problem-major, the
    rows of `generate_groups`), or None for a task without `response_prefix`."""
    if not has_prefix(task):
        return None
    sizes = [counts] * len(problems) if isinstance(counts, int) else [int(c) for c in counts]
    return [
        task.response_prefix(p, rng) for p, g in zip(problems, sizes, strict=True) for _ in range(g)
    ]


def encode_prefixes(tokenizer, prefixes: list[str], device) -> tuple[Tensor, Tensor]:
    """(ids (N, F), lengths (N,)) of the prefixes, right-padded with 0; no special tokens."""
    encoded = [tokenizer(text, add_special_tokens=False)["input_ids"] for text in prefixes]
    width = max((len(e) for e in encoded), default=0)
    ids = torch.zeros((len(encoded), max(width, 1)), dtype=torch.long)
    for i, e in enumerate(encoded):
        if e:
            ids[i, : len(e)] = torch.tensor(e)
    lengths = torch.tensor([len(e) for e in encoded], dtype=torch.long)
    return ids.to(device), lengths.to(device)


def free_weights(weights: Tensor, forced: Tensor | None) -> Tensor:
    """weights (B, T) with the first forced[i] positions of row i set to 0 (None: unchanged)."""
    if forced is None:
        return weights
    t = torch.arange(weights.shape[1], device=weights.device)  # (T,)
    return torch.where(t[None, :] < forced.to(weights.device)[:, None], 0.0, weights)

"""Calling a model through its own `model(...)` forward and cache, across transformers versions.

Sampling and the log-prob forward take this path for every model the lean forward does not
cover (`lean_llama.applies` false): these helpers say which keyword arguments the model takes,
where its output keeps the cache, and how a cache is cut to (or repeated over) batch rows.
"""

from __future__ import annotations

import inspect

import torch
from torch import Tensor


def accepts(model: torch.nn.Module, name: str) -> bool:
    """Whether model.forward takes the keyword argument `name` (e.g. logits_to_keep)."""
    return name in inspect.signature(model.forward).parameters


def cache_arg(model: torch.nn.Module) -> str:
    """transformers >= 5.2x names the cache argument `cache`; older versions `past_key_values`."""
    return "cache" if accepts(model, "cache") else "past_key_values"


def cache_of(out) -> object:
    """The cache a forward returned, under either name."""
    cache = getattr(out, "cache", None)
    return out.past_key_values if cache is None else cache


def select_rows(cache, rows: Tensor):
    """The cache restricted (or repeated) to batch rows `rows`, in that order."""
    if hasattr(cache, "reorder_cache"):
        cache.reorder_cache(rows)
        return cache
    return tuple(tuple(x.index_select(0, rows) for x in layer) for layer in cache)  # legacy

"""Random batches for the engine equivalence tests: groups of 1-16 responses (interleaved
rows, so nothing rests on contiguity), binary rewards with unanimous groups, rewards with ties,
continuous rewards, and response lengths from 0 (empty) to T tokens."""

from __future__ import annotations

from typing import NamedTuple

import torch

F64 = torch.float64
T = 12  # padded width


class Batch(NamedTuple):
    rewards: torch.Tensor  # (N,) float64
    group_ids: torch.Tensor  # (N,) long
    mask: torch.Tensor  # (N, T) float64, 1 on a response's tokens
    lengths: torch.Tensor  # (N,) long |o_i|


def random_batch(seed: int, min_size: int = 1, kind: str | None = None) -> Batch:
    """One batch; `kind` binary | ties | continuous (None: by seed)."""
    g = torch.Generator().manual_seed(seed)
    kind = kind or ("binary", "ties", "continuous")[seed % 3]
    groups = int(torch.randint(1, 7, (1,), generator=g))
    sizes = torch.randint(min_size, 17, (groups,), generator=g)
    rewards, ids = [], []
    for j, size in enumerate(sizes.tolist()):
        u = float(torch.rand((), generator=g))
        if kind == "binary":
            p = 0.0 if u < 0.2 else 1.0 if u > 0.8 else u  # unanimous groups at the ends
            r = (torch.rand(size, generator=g) < p).double()
        elif kind == "ties":
            r = torch.randint(0, 3, (size,), generator=g).double() / 2  # {0, 0.5, 1}
            if u < 0.2:
                r = torch.full((size,), 0.5, dtype=F64)  # a unanimous non-binary group
        else:
            r = torch.randn(size, generator=g, dtype=F64)
        rewards.append(r)
        ids.append(torch.full((size,), 10 * j + 3, dtype=torch.long))  # arbitrary ids
    order = torch.randperm(int(sizes.sum()), generator=g)
    r, gid = torch.cat(rewards)[order], torch.cat(ids)[order]
    lengths = torch.randint(0, T + 1, r.shape, generator=g)
    lengths[torch.rand(r.shape, generator=g) < 0.15] = 0  # empty responses
    lengths[0] = max(int(lengths[0]), 2)  # at least two tokens in the batch (verl's var)
    mask = (torch.arange(T)[None, :] < lengths[:, None]).to(F64)
    return Batch(r, gid, mask, lengths)


def token_losses(seed: int, batch: Batch) -> tuple[torch.Tensor, torch.Tensor]:
    """(logp, old_logp) (N, T): ratios exp(+-0.5) around 1, so PPO's 0.2 clip binds on some
    tokens and verl's dual clip (ratio > 3) never does."""
    g = torch.Generator().manual_seed(seed + 7919)
    old = -torch.rand(batch.mask.shape, generator=g, dtype=F64) * 3
    logp = old + (torch.rand(batch.mask.shape, generator=g, dtype=F64) - 0.5)
    return logp, old

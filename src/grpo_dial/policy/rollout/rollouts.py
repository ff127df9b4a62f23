"""The batch of sampled responses (`Rollouts`): row selection and concatenation.

Row i holds prompt x_i = bos + prompt (left-padded to width P) and response o_i (right-padded
to width T, EOS included when produced); the rows of one problem share a group id. A batch may
carry the sampler's recorded projection outputs (`activation_record.Recorded`), which follow
its rows through `select` and `concat`.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor

from grpo_dial.data.tasks.base import Problem
from grpo_dial.policy.activation_record import Recorded


@dataclass
class Rollouts:
    """N sampled responses; row i answers `problems[i]`; rows of one group share `group_ids`."""

    problems: list[Problem]  # (N,)
    group_ids: Tensor  # (N,) long, 0..M-1: same problem in the same call
    prompt_ids: Tensor  # (N, P) left-padded, bos first
    prompt_mask: Tensor  # (N, P) 1 on real prompt tokens
    response_ids: Tensor  # (N, T) right-padded, EOS included when produced
    response_mask: Tensor  # (N, T) 1 on generated tokens up to and including EOS
    finished: Tensor  # (N,) bool, EOS produced within max_new_tokens
    texts: list[str]  # (N,) decoded responses without EOS or padding
    pad_token_id: int = 0  # fills padded positions when batches are concatenated
    recorded: Recorded | None = None  # the sampler's projection outputs (reuse)
    forced: Tensor | None = None  # (N,) leading response tokens the task forced (rollout/forced)
    prefixes: list[str] | None = None  # (N,) the forced texts

    @property
    def response_lengths(self) -> Tensor:
        return self.response_mask.sum(1)  # (N,)

    def __len__(self) -> int:
        return len(self.problems)

    def select(self, rows: Tensor) -> Rollouts:
        """Rows `rows` (indices or a bool mask), group ids renumbered 0..M'-1 in sorted order."""
        rows = torch.as_tensor(rows, device=self.group_ids.device)
        if rows.dtype == torch.bool:
            rows = rows.nonzero().squeeze(1)  # (N',)
        idx = rows.tolist()
        _, gid = torch.unique(self.group_ids[rows], return_inverse=True)  # (N',)
        return Rollouts(
            problems=[self.problems[i] for i in idx],
            group_ids=gid,
            prompt_ids=self.prompt_ids[rows],
            prompt_mask=self.prompt_mask[rows],
            response_ids=self.response_ids[rows],
            response_mask=self.response_mask[rows],
            finished=self.finished[rows],
            texts=[self.texts[i] for i in idx],
            pad_token_id=self.pad_token_id,
            recorded=None if self.recorded is None else self.recorded.take(rows),
            forced=None if self.forced is None else self.forced[rows],
            prefixes=None if self.prefixes is None else [self.prefixes[i] for i in idx],
        )


def pad_to(x: Tensor, width: int, value: int, left: bool) -> Tensor:
    """x (N, W) padded with `value` to (N, width), on the left or the right."""
    extra = width - x.shape[1]
    return F.pad(x, (extra, 0) if left else (0, extra), value=value)


def concat(parts: list[Rollouts]) -> Rollouts:
    """One Rollouts from several (e.g. DAPO refill rounds): prompts re-padded on the left,
    responses on the right, group ids renumbered so part j's groups follow part j-1's."""
    if not parts:
        raise ValueError("concat needs at least one Rollouts")
    p_width = max(r.prompt_ids.shape[1] for r in parts)
    t_width = max(r.response_ids.shape[1] for r in parts)
    pad = parts[0].pad_token_id
    gids, offset = [], 0
    for r in parts:
        _, gid = torch.unique(r.group_ids, return_inverse=True)  # (N_j,) 0..M_j-1
        gids.append(gid + offset)
        offset += int(gid.max()) + 1 if gid.numel() else 0
    return Rollouts(
        problems=[p for r in parts for p in r.problems],
        group_ids=torch.cat(gids),
        prompt_ids=torch.cat([pad_to(r.prompt_ids, p_width, pad, True) for r in parts]),
        prompt_mask=torch.cat([pad_to(r.prompt_mask, p_width, 0, True) for r in parts]),
        response_ids=torch.cat([pad_to(r.response_ids, t_width, pad, False) for r in parts]),
        response_mask=torch.cat([pad_to(r.response_mask, t_width, 0, False) for r in parts]),
        finished=torch.cat([r.finished for r in parts]),
        texts=[t for r in parts for t in r.texts],
        pad_token_id=pad,
        recorded=_concat_recorded(parts),
        forced=_concat_forced(parts),
        prefixes=None
        if all(r.prefixes is None for r in parts)
        else [t for r in parts for t in (r.prefixes or [""] * len(r))],
    )


def _concat_forced(parts: list[Rollouts]) -> Tensor | None:
    """The parts' forced counts as one (N,), zeros for a part without any; None if none has."""
    if all(r.forced is None for r in parts):
        return None
    return torch.cat(
        [
            r.forced if r.forced is not None else torch.zeros(len(r), dtype=torch.long,
                                                              device=r.group_ids.device)
            for r in parts
        ]
    )


def _concat_recorded(parts: list[Rollouts]) -> Recorded | None:
    """The parts' records as one (no copy), or None unless every part has one of the same
    weights."""
    records = [r.recorded for r in parts]
    if any(rec is None or rec.stamp != records[0].stamp for rec in records):
        return None
    return records[0] if len(records) == 1 else Recorded.concat(records)

"""What one RL step hands on: the sampled batch (`Batch`) and the outcome of its update
(`UpdateResult`). Plain containers, shared by the step (which fills them) and the records
(which tabulate them), so neither of those modules imports the other's internals.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from torch import Tensor

from grpo_dial.policy.rollout import Rollouts


@dataclass
class Batch:
    """One step's samples: every response generated (all rounds) and what the loss sees."""

    rollouts: Rollouts  # N responses, rounds concatenated, group ids 0..M-1
    group_ids: Tensor  # (N,) rollouts.group_ids on the CPU, where all per-response records live
    rewards: Tensor  # (N,) 1.0 correct, 0.0 wrong or truncated
    truncated: Tensor  # (N,) bool
    work: np.ndarray  # (N,) characters of necessary work, NaN where the task cannot tell
    redundant: np.ndarray  # (N,) characters of redundant re-checking, NaN likewise
    rounds: Tensor  # (N,) long: 0 = first sampling, r = r-th refill
    trained: Tensor  # (N,) bool: keep_mask of the dial (drop removes silent groups)
    resampled_prompts: int  # prompts drawn in refill rounds
    pool_index: np.ndarray  # (N,) pool index of each response's prompt
    drawn_index: np.ndarray  # (D,) pool index of every prompt drawn (all rounds, funded or not)
    drawn_sizes: np.ndarray  # (D,) responses allocated to it (0: not sampled)
    drawn_rounds: np.ndarray  # (D,) its round (0 = first sampling)


@dataclass
class UpdateResult:
    """The optimizer steps taken on one batch."""

    loss: float  # mean over the batch's updates; NaN when nothing was trained
    grad_norm: float  # mean global norm before clipping
    kl: float  # k3 KL to the base on the first update; NaN when kl_coef = 0
    finite: bool

"""Which logged responses form one group (the G responses to one prompt that share a baseline).

Rule: a group is the responses to one prompt within one step. When a step holds the same prompt
more than once (a dataset that repeats problems), the copies are separate groups in the trainer
but one prompt here; they are split back into groups of the declared G only where the log keeps
the trainer's order:
- TRL logs rows in generation order, a prompt's G completions next to each other (RepeatSampler,
  mini_repeat_count = num_generations), so a run of consecutive rows of one prompt is cut into
  groups of G (`contiguous=True`);
- verl dumps after `_balance_batch` reorders the batch (ray_trainer.py), and a generic log has
  no known order: there the copies stay one group of 2G, and the diagnostics flag every group
  whose size differs from G.
G is `group_size` when given (num_generations / rollout.n), else the most common run length
(TRL) or group size (others).
"""

from __future__ import annotations

import numpy as np
import pandas as pd


def modal_size(sizes: pd.Series) -> int:
    """The most common value (the smallest among ties); 0 for no sizes."""
    counts = sizes.value_counts()
    return int(counts[counts == counts.max()].index.min()) if len(counts) else 0


def assign_groups(
    step: pd.Series, prompt_id: pd.Series, group_size: int | None, contiguous: bool
) -> tuple[np.ndarray, int, int]:
    """(group index within its step (N,), G, number of (step, prompt) groups split). Rows must
    be sorted by step, in log order within it. A (step, prompt) group larger than G is split when
    `contiguous` and each of its runs of consecutive rows is a multiple of G long."""
    if group_size is not None and (int(group_size) != group_size or group_size < 1):
        raise ValueError(f"group_size must be a positive integer, got {group_size!r}")
    key = pd.DataFrame({"step": step, "prompt_id": prompt_id}).reset_index(drop=True)
    by_prompt = key.groupby(["step", "prompt_id"], sort=False)
    size = int(group_size) if group_size else modal_size(by_prompt.size())
    n_split = 0
    if contiguous:
        new_run = (key["step"] != key["step"].shift()) | (
            key["prompt_id"] != key["prompt_id"].shift()
        )
        run = new_run.cumsum()  # (N,)
        uneven = run.map(run.value_counts()) % size != 0  # (N,) a run not made of whole groups
        split = (by_prompt["step"].transform("size") > size) & ~uneven.groupby(
            [key["step"], key["prompt_id"]], sort=False
        ).transform("any")  # (N,)
        key["run"] = run.where(split, -1)
        key["chunk"] = (run.groupby(run).cumcount() // size).where(split, -1)
        n_split = int((split & new_run).groupby([key["step"], key["prompt_id"]]).any().sum())
    gid = key.groupby(list(key.columns), sort=False).ngroup()  # by first appearance
    group = (gid - gid.groupby(key["step"]).transform("min")).to_numpy(np.int64)
    return group, size, n_split

"""What the dial's newer estimators need from a run beyond a batch's rewards and group ids.

- Stratified GRPO (dial.strata): the stratum of every response (`strata_of`): 'truncated' (0/1,
  from the verifier), 'length_bucket' (1 when a response has more tokens than its group's mean)
  or a key the task provides (`Task.stratum`, e.g. the arithmetic tail's 'check_lines').
- HA-DW (dial.anchor): the difficulty anchor C each group is weighed against (`anchor_for`): the
  cross-batch anchor of core.difficulty_anchor ('batch'), or the prompt's running pass rate from
  the pass-rate tracker before this step's update ('prompt').
- lambda-GRPO with a learnable lambda: one scalar parameter (`new_lambda`), stepped by the run's
  optimizer in a parameter group of its own (learning rate dial.lambda_lr, no weight decay).
The formulas are registered in grpo_dial.core.estimators; this module only gathers the inputs
an estimator `needs` (GATHER).
"""

from __future__ import annotations

import numpy as np
import torch
from torch import Tensor

from grpo_dial.core.advantage import group_stats
from grpo_dial.core.dial import Dial
from grpo_dial.core.difficulty_anchor import AnchorState, anchor_before, anchor_update
from grpo_dial.core.estimators import active_estimators
from grpo_dial.data.tasks.base import Task, stratum_error
from grpo_dial.train.batch import Batch


def strata_of(batch: Batch, task: Task, key: str) -> Tensor:
    """(N,) long stratum of every response of `batch` under `key` (CPU)."""
    if key == "truncated":
        return batch.truncated.long()
    if key == "length_bucket":
        n = batch.rollouts.response_lengths.cpu().double()  # (N,)
        stats = group_stats(n, batch.group_ids)  # mean_g of the token counts
        return (n > stats.mean[stats.index]).long()
    if (why := stratum_error(task, key)) is not None:
        raise ValueError(why)
    ro = batch.rollouts
    pairs = zip(ro.problems, ro.texts, strict=True)
    return torch.tensor([task.stratum(p, t, key) for p, t in pairs], dtype=torch.long)


def anchor_for(
    dial: Dial, state: AnchorState, batch: Batch, estimate: np.ndarray
) -> float | Tensor | None:
    """C for `advantage.advantages`: the batch anchor C_t^- (a float), or (M,) the tracker's
    pass-rate estimate of each group's prompt (estimate: (J,) over the pool); None when off."""
    if dial.anchor == "none":
        return None
    if dial.anchor == "batch":
        y = float(batch.rewards.mean())
        return anchor_before(state, y, form=dial.anchor_update, window=dial.anchor_window)
    stats = group_stats(batch.rewards, batch.group_ids)
    first = torch.full((stats.ids.numel(),), len(stats.index), dtype=torch.long)
    first = first.scatter_reduce(0, stats.index, torch.arange(len(stats.index)), "amin")  # (M,)
    return torch.as_tensor(estimate[batch.pool_index[first.numpy()]], dtype=torch.float64)


def next_anchor(dial: Dial, state: AnchorState, batch: Batch) -> AnchorState:
    """The anchor state after this batch (unchanged unless dial.anchor == 'batch')."""
    if dial.anchor != "batch" or len(batch.rewards) == 0:
        return state
    y = float(batch.rewards.mean())
    return anchor_update(state, y, dial.anchor_rate, dial.anchor_window, form=dial.anchor_update)


# how the trainer gathers each per-batch input a registered estimator `needs`
GATHER = {
    "strata": lambda dial, batch, task, state, estimate: strata_of(batch, task, dial.strata),
    "anchor": lambda dial, batch, task, state, estimate: anchor_for(dial, state, batch, estimate),
    "lengths": lambda dial, batch, task, state, estimate: batch.rollouts.response_lengths.cpu(),
}


def context(dial: Dial, batch: Batch, task: Task, state: AnchorState, estimate: np.ndarray) -> dict:
    """The keyword arguments `advantage.advantages` needs for this dial on this batch: what each
    estimator it uses needs (core.estimators), gathered in registration order."""
    out = {}
    for est in active_estimators(dial):
        for need in est.needs:
            if need not in GATHER:
                raise ValueError(
                    f"estimator {est.name!r} needs {need!r}, which the trainer cannot gather; "
                    f"it gathers: {', '.join(GATHER)}"
                )
            out[need] = GATHER[need](dial, batch, task, state, estimate)
    return out


def new_lambda(dial: Dial, device: str | torch.device) -> torch.nn.Parameter | None:
    """lambda-GRPO's learnable lambda, at dial.lambda_value; None unless dial.lambda_learnable."""
    if not dial.lambda_learnable:
        return None
    return torch.nn.Parameter(torch.tensor(float(dial.lambda_value), device=device))


def attach_lambda(
    optimizer: torch.optim.Optimizer, lam: torch.nn.Parameter | None, dial: Dial
) -> None:
    """Add lambda to the optimizer as its own parameter group (lr dial.lambda_lr, no decay)."""
    if lam is not None:
        optimizer.add_param_group({"params": [lam], "lr": dial.lambda_lr, "weight_decay": 0.0})


def lambda_value(dial: Dial, lam: torch.nn.Parameter | None) -> float:
    """The lambda this step weighs with (NaN for a dial without lambda-GRPO's weights)."""
    if dial.length_norm != "lambda":
        return float("nan")
    return float(dial.lambda_value if lam is None else lam.detach())

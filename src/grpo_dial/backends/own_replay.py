"""The later states of an aware sweep cell's runs: a run replayed to step k, the one-step probe
at that state, and the modes' continue logits there.

Replay (`replay`). A sweep run is deterministic per seed: train.loop.new_run seeds every source
of randomness from the seed (prompt order and sampling have their own generators), so the state
after k steps is rebuilt by running the cell's first k steps again, the loop of
backends/own_cells.train_cell, rather than stored. `replayed_steps` is the replayed steps' table
in the cell's columns: the stage checks it against the stored cell, step for step.

Probe at a state (`probe_state`). own_cells.probe_batches, continued from the run: `batches`
further steps of the replayed run at learning rate 0 with no clipping, so the weights stay at the
state and each step leaves its raw gradient g_b; per unit lr mode m's continue logit moves by
-J_m . g_b, J_m of the state (analysis.aware.kernel.mode_gradients on the state's own sample,
restricted to the weights the run moves). The batches are the run's own next draws, so at k = 0
they are probe_batches' with the run's seed, batch for batch.

`mode_logits`: each mode's mean continue logit log P(continue) - log P(EOS) over the decision
positions of the first `rows` responses, the quantity whose gradient is J_m.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import replace

import pandas as pd

from grpo_dial.analysis.aware.probe import mode_moves
from grpo_dial.backends.own_cells import _flat_grad, cell_config, cell_steps, new_cell_run
from grpo_dial.policy.masks import weight_masks


def replay(base_dir: str, task, problems, heldout, arm, train: Mapping, seed: int, pool: int,
           pool_seed: int, steps: int, device: str = "cpu", weights: str = "all"):  # fmt: skip
    """The RunState of `arm`'s run with `seed` after its first `steps` steps (0: the base), as
    own_cells.train_cell trains it (same config, masks and step)."""
    from grpo_dial.train import loop

    total = cell_config(train, arm, pool, pool_seed, int(seed), device).steps
    if not 0 <= steps <= total:
        raise ValueError(f"a later state's step must be in 0..train.steps ({total}), got "
                         f"{steps}")  # fmt: skip
    run, config = new_cell_run(base_dir, problems, heldout, arm, train, int(seed), pool,
                               pool_seed, device, weights)  # fmt: skip
    for step in range(1, steps + 1):
        loop.run_step(run, task, arm.dial, config, step)
    return run


def replayed_steps(run) -> pd.DataFrame:
    """The replayed steps' table with each step's grad_norm: train_cell's columns, no seed."""
    return cell_steps(run)


def state_gradients(run, rollouts, weights: str = "all", rows: int = 512):
    """(J_~, J_=): mode_gradients of the run's policy on the first `rows` of `rollouts`,
    restricted to the weights the run moves (its trainable parameters, times their masks), in
    _flat_grad's order."""
    import torch

    from grpo_dial.analysis.aware.kernel import mode_gradients

    e, c, _ = mode_gradients(run.model, run.tokenizer, rollouts, rows)
    if e is None or c is None:
        raise ValueError("a later state's sample has no response in one mode: no J")
    mask = torch.cat([m.reshape(-1) for m in weight_masks(run.model, run.tokenizer, weights)])
    return e * mask.double(), c * mask.double()


def probe_state(run, task, dial, config, batches: int, j_wrong, j_correct, start: int = 0,
                step: tuple | None = None) -> pd.DataFrame:  # fmt: skip
    """One row per batch (batch, wrong, correct, contrast, grad_norm) of `batches` further steps
    of `run` at learning rate 0 (module docstring), numbered from step `start` + 1 (the steps
    the run took); NaN for a non-finite step. step = (lr, rollouts, rows): also the move SGD's
    whole step at that lr makes, per unit lr, (L_m(w - lr g_b) - L_m(w)) / lr with L_m
    `mode_logits` on those rollouts (columns wrong_step, correct_step): the first order plus
    the curvature along g_b. The run is spent: its optimizer stays at lr 0. Raises if the
    weights moved."""
    import torch

    from grpo_dial.train import loop

    if batches < 1:
        raise ValueError(f"batches must be >= 1, got {batches}")
    config = replace(config, grad_clip=None, kl_coef=0.0)
    for group in run.optimizer.param_groups:
        group["lr"] = 0.0  # the step leaves every weight and .grad as they are
    params = [p for p in run.model.parameters() if p.requires_grad]
    held = [p.detach().clone() for p in params]
    before = torch.cat([p.reshape(-1) for p in held])
    at = mode_logits(run.model, run.tokenizer, step[1], step[2]) if step else None
    rows = []
    for b in range(batches):
        result = loop.run_step(run, task, dial, config, start + b + 1)
        g = _flat_grad(params)
        w, c = mode_moves(g, j_wrong, j_correct) if g is not None else (math.nan, math.nan)
        row = {"batch": b, "wrong": w, "correct": c, "contrast": w - c,
               "grad_norm": float(result.grad_norm)}  # fmt: skip
        if step:
            row |= _whole_step(run, params, held, step, at) if g is not None else {
                "wrong_step": math.nan, "correct_step": math.nan}  # fmt: skip
        rows.append(row)
    if not torch.equal(before, torch.cat([p.detach().reshape(-1) for p in params])):
        raise RuntimeError("probe_state: the weights moved; the probe must stay at the state")
    return pd.DataFrame(rows)


def _whole_step(run, params, held, step, at) -> dict[str, float]:
    """Each mode's logit moved by the SGD step -lr .grad, per unit lr; the weights put back."""
    import torch

    lr, rollouts, rows = step
    with torch.no_grad():
        for p in params:
            p.sub_(lr * p.grad)
    moved = mode_logits(run.model, run.tokenizer, rollouts, rows)
    with torch.no_grad():
        for p, h in zip(params, held, strict=True):
            p.copy_(h)
    return {f"{m}_step": (moved[m] - at[m]) / lr for m in ("wrong", "correct")}


def mode_logits(model, tokenizer, rollouts, rows: int = 512) -> dict[str, float]:
    """{"wrong": mean continue logit of the estimate mode "~", "correct": of the compute mode
    "="} over the decision positions of the first `rows` responses (module docstring)."""
    import numpy as np
    import torch

    from grpo_dial.analysis.aware.kernel import _decisions, _forward
    from grpo_dial.policy.rollout.sample import banned_ids, eos_ids

    r = rollouts.select(torch.arange(min(rows, len(rollouts))))
    eos = eos_ids(model, tokenizer)
    skip = set(eos) | set(banned_ids(tokenizer, eos))
    keep = [i for i in range(model.config.vocab_size) if i not in skip]
    mode = np.array([(p or " ")[0] for p in r.prefixes])  # (N,)
    decide = _decisions(r)  # (N, T)
    with torch.no_grad():
        logits = _forward(model, r).float()  # (N, T, V)
        cont = torch.logsumexp(logits[..., keep], -1) - torch.logsumexp(logits[..., eos], -1)
    out = {}
    for name, m in (("wrong", "~"), ("correct", "=")):
        sel = torch.tensor(decide & (mode == m)[:, None])  # (N, T)
        out[name] = float(cont[sel].double().mean()) if bool(sel.any()) else math.nan
    return out


__all__ = ["mode_logits", "probe_state", "replay", "replayed_steps", "state_gradients"]

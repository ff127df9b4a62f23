"""The own trainer in this process, for studies that train many small runs in one job: the aware
sweep's cells (every seed of one arm at one level) and the one-step probe's batches. Reached
through `grpo_dial.backends.in_process(arm)`, which refuses every other backend by name.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import pandas as pd

from grpo_dial.analysis.aware.probe import KEEP_BYTES, mode_moves, probe_passes
from grpo_dial.analysis.aware.runs import step_table
from grpo_dial.policy.masks import restrict, weight_masks


def cell_config(train: Mapping, arm, pool: int, pool_seed: int, seed: int, device: str = "cpu"):
    """The TrainConfig of one sweep run: the config's train keys without evaluation, identity
    probe or progress bar, the pool, the seed and the arm's allocation."""
    from dataclasses import replace

    from grpo_dial.train.config import TrainConfig

    config = TrainConfig(
        **{**train, "identity_every": 0, "eval_every": 0, "progress": False},
        train_pool=pool,
        pool_seed=pool_seed,
        seed=int(seed),
        device=device,
    )
    return replace(config, allocation=arm.allocation)


def train_cell(base_dir: str, task_spec: Mapping, arm, train: Mapping, seeds: Sequence[int],
               pool: int, pool_seed: int, device: str = "cpu", frozen: bool = False,
               weights: str = "all") -> pd.DataFrame:  # fmt: skip
    """Every seed of `arm` trained for train['steps'] steps from the base in this process, with
    the trainer's own step (train.loop.run_step; no evaluation, probe or checkpoint): the
    runs' step tables (analysis/aware.step_table) with the step's grad_norm and the seed.
    frozen: the tail-frozen control, every step taken at learning rate 0 (aware_sweep's
    docstring). weights: what the steps move (`weight_masks`: "all", or the mode markers'
    embedding rows alone)."""
    from grpo_dial.data.tasks import task_from_spec
    from grpo_dial.train import loop

    task = task_from_spec(task_spec)
    problems = task.problems("train", pool, pool_seed)
    heldout = task.problems("heldout", 1, pool_seed)
    out = []
    for seed in seeds:
        run, config = new_cell_run(base_dir, problems, heldout, arm, train, int(seed), pool,
                                   pool_seed, device, weights)  # fmt: skip
        if frozen:
            for group in run.optimizer.param_groups:
                group["lr"] = 0.0
        for step in range(1, config.steps + 1):
            loop.run_step(run, task, arm.dial, config, step)
        out.append(cell_steps(run).assign(seed=int(seed)))
    return pd.concat(out, ignore_index=True)


def new_cell_run(base_dir: str, problems, heldout, arm, train: Mapping, seed: int, pool: int,
                 pool_seed: int, device: str = "cpu", weights: str = "all"):  # fmt: skip
    """(RunState, TrainConfig) of one sweep run before its first step: the base in float32,
    restricted to `weights` (`weight_masks`), the trainer's run at `cell_config`."""
    from grpo_dial.policy.model import load_policy
    from grpo_dial.train import loop

    if weights != "all" and float(train.get("weight_decay", 0.0)):
        raise ValueError(
            f"sweep weights {weights!r} with weight_decay {train['weight_decay']}: decay would "
            "move the weights the run holds still; set train.weight_decay to 0"
        )
    config = cell_config(train, arm, pool, pool_seed, int(seed), device)
    model, tokenizer = load_policy(base_dir, device=device, dtype="float32")
    if weights != "all":
        restrict(model, weight_masks(model, tokenizer, weights))
    return loop.new_run(model, tokenizer, None, problems, heldout, arm.dial, config, None), config


def cell_steps(run) -> pd.DataFrame:
    """A sweep run's steps so far (analysis/aware.step_table) with each step's grad_norm."""
    from grpo_dial.train import loop
    from grpo_dial.train import records as rec

    frames = rec.to_frames(run.records, loop.table_columns())
    return step_table(frames["responses"]).merge(frames["steps"][["step", "grad_norm"]],
                                                 on="step", how="left")  # fmt: skip


def _flat_grad(params):
    """Every parameter's .grad flattened in order (float64), or None when one is missing (the
    trainer cleared a non-finite step's gradient)."""
    import torch

    if any(p.grad is None for p in params):
        return None
    return torch.cat([p.grad.reshape(-1) for p in params]).double()


def probe_batches(model, tokenizer, task, problems, heldout, dial, config, batches: int,
                  j_wrong, j_correct, also: Mapping | None = None,
                  keep_bytes: int = KEEP_BYTES) -> pd.DataFrame:  # fmt: skip
    """One row per batch (batch, wrong, correct, contrast, grad_norm, and Adam's first-order
    moves adam_*, `adam_moves`): `batches` steps of the trainer (train.loop.run_step) at the base
    policy with SGD at learning rate 0 and no clipping, each batch's gradient projected by
    `mode_moves` (module docstring); NaN for a non-finite step. also: name -> (J_~, J_=)
    projected on the same gradients as columns wrong_<name>, correct_<name>, contrast_<name>
    (with J restricted to the weights a masked SGD step moves, J_masked . g = J . (mask g) is
    that step's move). The batches' gradients are kept for `adam_moves` while they fit in
    keep_bytes; beyond that only their squares' sum is, and a second pass over the same batches
    (the trainer's draws repeat from its seed at lr 0) projects each one. Raises if the
    weights moved."""
    import torch

    if batches < 1:
        raise ValueError(f"batches must be >= 1, got {batches}")
    params = [p for p in model.parameters() if p.requires_grad]
    before = torch.cat([p.detach().reshape(-1) for p in params]).clone()
    keep = probe_passes(batches, sum(p.numel() for p in params), keep_bytes) == 1
    rows, grads, squares, count = [], [], None, 0
    for b, result, g in _base_steps(model, tokenizer, task, problems, heldout, dial, config,
                                    batches):  # fmt: skip
        row = {"batch": b, "grad_norm": float(result.grad_norm)}
        for name, (jw, jc) in {"": (j_wrong, j_correct), **(also or {})}.items():
            w, c = mode_moves(g, jw, jc) if g is not None else (math.nan, math.nan)
            sfx = f"_{name}" if name else ""
            row |= {f"wrong{sfx}": w, f"correct{sfx}": c, f"contrast{sfx}": w - c}
        rows.append(row)
        if keep:
            grads.append(g)
        elif g is not None:
            squares, count = (g * g if squares is None else squares.add_(g * g)), count + 1
    if keep:
        adam = adam_moves(grads, j_wrong, j_correct)
    else:
        rms = None if squares is None else (squares / count).sqrt_().add_(ADAM_EPS)
        adam = {"adam_wrong": [], "adam_correct": [], "adam_contrast": []}
        for _, _, g in _base_steps(model, tokenizer, task, problems, heldout, dial, config,
                                   batches):  # fmt: skip
            w, c = mode_moves(g / rms, j_wrong, j_correct) if g is not None else (math.nan,) * 2
            adam["adam_wrong"].append(w)
            adam["adam_correct"].append(c)
            adam["adam_contrast"].append(w - c)
    after = torch.cat([p.detach().reshape(-1) for p in params])
    if not torch.equal(before, after):
        raise RuntimeError("probe_batches: the weights moved; the probe must stay at the base")
    return pd.DataFrame(rows).assign(**adam)


def _base_steps(model, tokenizer, task, problems, heldout, dial, config, batches: int):
    """(batch, step result, flat gradient or None) of `batches` steps of the trainer at the base
    policy: SGD at learning rate 0, no clipping, decay or KL (each step leaves the weights)."""
    from dataclasses import replace

    from grpo_dial.train import loop

    config = replace(config, optimizer="sgd", grad_clip=None, weight_decay=0.0, kl_coef=0.0)
    params = [p for p in model.parameters() if p.requires_grad]
    run = loop.new_run(model, tokenizer, None, problems, heldout, dial, config, None)
    for group in run.optimizer.param_groups:
        group["lr"] = 0.0  # SGD at lr 0: the step leaves every weight and .grad as they are
    for b in range(batches):
        result = loop.run_step(run, task, dial, config, b + 1)
        yield b, result, _flat_grad(params)


ADAM_EPS = 1e-8  # torch.optim.AdamW's default eps, the trainer's


def adam_moves(grads, j_wrong, j_correct) -> dict[str, list[float]]:
    """Per batch b, the first-order Adam move per unit lr of each mode's continue logit: Adam's
    step is about -lr E[g] / (sqrt(E[g^2]) + eps) per weight, so with r = sqrt(mean_b g_b^2) over
    the batches (weight by weight) the move is the mean over b of -J_m . (g_b / (r + eps));
    columns adam_wrong, adam_correct, adam_contrast (NaN for a batch without a gradient)."""
    import torch

    ok = [g for g in grads if g is not None]
    nan = [math.nan] * len(grads)
    if not ok:
        return {"adam_wrong": nan, "adam_correct": nan, "adam_contrast": nan}
    rms = torch.stack(ok).pow(2).mean(0).sqrt() + ADAM_EPS
    out = {"adam_wrong": [], "adam_correct": [], "adam_contrast": []}
    for g in grads:
        w, c = mode_moves(g / rms, j_wrong, j_correct) if g is not None else (math.nan, math.nan)
        out["adam_wrong"].append(w)
        out["adam_correct"].append(c)
        out["adam_contrast"].append(w - c)
    return out

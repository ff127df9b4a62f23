"""The RL loop: generate -> score -> advantages -> loss -> update, one dial per run.

Each step, in order (each a separate call): `sample_batch` (generate G responses for
prompts_per_step prompts and score them with the task's verifier, refilling dropped silent groups
for DAPO), `advantage.advantages`, the identity probe (every identity_every steps, on-policy, before
the update), `policy_update` (advantage.weighted_policy_loss, one backward per bucket, optional KL,
clipping, optimizer step), then records, held-out evaluation and the checkpoint. With
allocation.scheme 'adaptive' the responses per prompt come from grpo_dial.train.allocation on the
running pass-rate estimates of grpo_dial.passrates.tracker (updated after sampling, every step,
whatever the allocation). The parts and their departures from the textbook algorithm are in
grpo_dial.train.step; records in grpo_dial.train.records; checkpoints in grpo_dial.train.checkpoint.

The policy (and the frozen base for KL) is loaded in float32 on every device, so AdamW steps of
size ~lr are not rounded away as they would be in bf16 weights.

Resume is exact on the same device and thread count: the checkpoint holds the model, the
optimizer, the pass-rate counts and every RNG at a step boundary, no step draws randomness from
anywhere else, and evaluation (greedy) and the probe draw none, so a resumed run repeats the
uninterrupted one's steps bit for bit (tested with real SIGKILLs of the Snakemake job,
tests/workflow/test_kill_resume.py). Which checkpoint is resumed, and what happens to another
run's: grpo_dial.train.resume; what stops a run: grpo_dial.train.guard.
"""

from __future__ import annotations

import hashlib
import logging
import random
import time
from collections.abc import Callable, Mapping
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from tqdm.auto import tqdm

from grpo_dial.core import advantage
from grpo_dial.core.bands import UNRATED
from grpo_dial.core.dial import Dial
from grpo_dial.data.tasks.base import Problem, Task, stratum_error
from grpo_dial.passrates.tracker import (
    tracker_estimate,
    tracker_prior,
    tracker_unanimous,
    tracker_update,
)
from grpo_dial.policy.model import autocast
from grpo_dial.policy.rollout import response_logprobs
from grpo_dial.train import checkpoint, estimator, guard, resume
from grpo_dial.train import records as rec
from grpo_dial.train.allocation import allocate_groups
from grpo_dial.train.batch import UpdateResult
from grpo_dial.train.config import TrainConfig
from grpo_dial.train.probe import IDENTITY_COLUMNS, identity_probe
from grpo_dial.train.state import RunState
from grpo_dial.train.step import (
    calibration_update_norm,
    evaluate,
    lr_match_factor,
    make_optimizer,
    policy_update,
    sample_batch,
    sampling_rngs,
    update_norm,
)

__all__ = [
    "TrainConfig",
    "RunState",
    "new_run",
    "run_step",
    "train_run",
    "calibration_update_norm",
    "lr_match_factor",
    "update_norm",
    "OUTPUTS",
    "table_columns",
]

log = logging.getLogger("grpo_dial")

def table_columns() -> dict[str, tuple[str, ...]]:
    """Each table's columns in the documented order; the steps table's follow the estimator
    registry (records.step_columns), so a newly registered estimator's columns are logged."""
    return {
        "steps": rec.step_columns(),
        "mass": rec.MASS_COLUMNS,
        "responses": tuple(rec.RESPONSE_COLUMNS),
        "evals": tuple(rec.EVAL_COLUMNS),
        "identity": tuple(IDENTITY_COLUMNS),
        "allocation": rec.ALLOCATION_COLUMNS,
    }
OUTPUTS = (*rec.TABLES, "model")  # keys of train_run's `outputs`; "model" is a directory


# --------------------------------------------------------------------------- the run


def _resume_key(
    config: TrainConfig, dial: Dial, pool, heldout, base: torch.nn.Module, prior: tuple
) -> dict:
    ids = "\n".join(p.prompt_id for p in [*pool, *heldout]).encode()
    return {
        "config": config.resume_key(),
        "dial": dial.as_dict(),
        "prompts": hashlib.sha1(ids).hexdigest(),
        "base_model": checkpoint.model_fingerprint(base),
        "tracker_prior": hashlib.sha1(np.concatenate(prior).tobytes()).hexdigest(),
        "sampling_device": torch.device(config.device).type,  # a generator's state is per kind
    }


def _due(step: int, every: int, last: int) -> bool:
    return step == last or (every > 0 and step % every == 0)


def _write_outputs(
    records: rec.Records, outputs: Mapping[str, str | Path], model, tokenizer
) -> None:
    from grpo_dial.policy.model import save_policy
    from grpo_dial.tables import write_table

    frames = rec.to_frames(records, table_columns())
    for name, path in outputs.items():
        if name == "model":
            save_policy(model, tokenizer, path)
        else:
            write_table(frames[name], path)


def _setup(base_model_dir, task: Task, dial: Dial, config: TrainConfig, pass_rates) -> RunState:
    from grpo_dial.policy.model import load_policy

    # float32 weights on every device: bf16 would round away AdamW steps of size ~lr.
    # Eval mode, or train mode with dropout off under gradient checkpointing (load_policy).
    model, tokenizer = load_policy(
        str(base_model_dir),
        device=config.device,
        dtype="float32",
        attn_implementation=config.attn_implementation,
        gradient_checkpointing=config.gradient_checkpointing,
    )
    ref_model = None
    if config.kl_coef > 0:
        ref_model = load_policy(
            str(base_model_dir), config.device, "float32", config.attn_implementation
        )[0].eval()
        ref_model.requires_grad_(False)
    pool = task.problems("train", config.train_pool, config.pool_seed)
    heldout = task.problems("heldout", config.heldout_prompts, config.pool_seed)
    return new_run(model, tokenizer, ref_model, pool, heldout, dial, config, pass_rates)


def new_run(
    model: torch.nn.Module,
    tokenizer: object,
    ref_model: torch.nn.Module | None,
    pool: list[Problem],
    heldout: list[Problem],
    dial: Dial,
    config: TrainConfig,
    pass_rates: pd.DataFrame | None,
) -> RunState:
    """A fresh run's state around a loaded policy: bands, seeds, samplers, the tracker's prior,
    the resume key and the optimizer (what train_run builds before its first step)."""
    bands, vocab = rec.band_map(
        [p.prompt_id for p in pool], [p.difficulty for p in pool], pass_rates
    )
    if UNRATED in vocab:
        n = sum(b == UNRATED for b in bands.values())
        log.warning("%d training prompts are not in the pass-rate table: band %r", n, UNRATED)
    random.seed(config.seed)
    torch.manual_seed(config.seed)
    rng, generator = sampling_rngs(config)
    prior = tracker_prior(
        [p.prompt_id for p in pool], pass_rates, config.allocation.prior_strength
    )
    key = _resume_key(config, dial, pool, heldout, model, prior)
    optimizer = make_optimizer(model, config)
    lam = estimator.new_lambda(dial, config.device)
    estimator.attach_lambda(optimizer, lam, dial)
    return RunState(
        model,
        tokenizer,
        ref_model,
        optimizer,
        rng,
        generator,
        pool,
        heldout,
        bands,
        vocab,
        key,
        prior,
        lam=lam,
    )


def run_step(run: RunState, task: Task, dial: Dial, config: TrainConfig, step: int) -> UpdateResult:
    """One step: generate + score (DAPO refill inside), advantages, probe, loss + update."""
    t0 = time.perf_counter()
    estimate, unanimous = tracker_estimate(*run.tracker), tracker_unanimous(*run.tracker)  # (J,)
    allocate, settings = None, config.allocation
    if settings.scheme != "uniform":

        def allocate(index: np.ndarray) -> np.ndarray:
            return allocate_groups(
                estimate[index],
                unanimous[index],
                config.group_size,
                allocation=settings.scheme,
                signal=settings.signal,
                g_min=settings.g_min,
                g_max=settings.g_max,
                unanimous_policy=settings.unanimous,
            )

    with autocast(config.precision, config.device):
        batch = sample_batch(
            run.model, run.tokenizer, task, run.pool, dial, config, run.rng, run.generator, allocate
        )
    ids = [p.prompt_id for p in run.pool]
    run.records["allocation"].append(
        rec.allocation_chunk(step, batch, ids, run.bands, estimate, unanimous)
    )
    run.tracker = tracker_update(
        *run.tracker, batch.pool_index, batch.rewards.numpy(), settings.decay
    )
    context = estimator.context(dial, batch, task, run.anchor, estimate)
    adv = advantage.advantages(batch.rewards, batch.group_ids, dial, **context)  # (N,)
    run.anchor = estimator.next_anchor(dial, run.anchor, batch)
    train = batch.rollouts.select(batch.trained)
    if config.identity_every and step % config.identity_every == 0:
        t_probe = time.perf_counter()
        probe = identity_probe(  # the group estimator's identity (strata, anchor left out)
            run.model, train, batch.rewards[batch.trained], dial, config.identity_groups, step
        )
        run.records["identity"].append({c: probe[c].tolist() for c in IDENTITY_COLUMNS})
        t0 += time.perf_counter() - t_probe  # wall_seconds excludes the probe
    ref_logp = None
    if run.ref_model is not None and len(train):
        with torch.no_grad(), autocast(config.precision, config.device):
            ref_logp = response_logprobs(run.ref_model, train, config.micro_batch)  # (B, T)
    lam_used = estimator.lambda_value(dial, run.lam)
    result = policy_update(
        run.model, run.optimizer, train, adv[batch.trained], dial, config, ref_logp, run.lam
    )
    lr = config.lr * config.lr_scale
    extras = rec.estimator_stats(dial, {**context, "lambda": lam_used}, batch)
    rec.record_step(
        run.records,
        step,
        batch,
        adv,
        result,
        dial,
        run.bands,
        run.vocab,
        lr,
        time.perf_counter() - t0,
        extras,
    )
    return result


def train_run(
    base_model_dir: str | Path,
    task: Task,
    dial: Dial,
    config: TrainConfig,
    outputs: Mapping[str, str | Path],
    checkpoint_dir: str | Path,
    pass_rates: pd.DataFrame | None = None,
    callback: Callable[[int], None] | None = None,
) -> None:
    """Train `dial` from the base policy for config.steps steps and write the tables.

    outputs: table name (steps, mass, responses, evals, identity; see COLUMNS) -> .parquet or
    .csv path, and optionally "model" -> directory for the final policy. Resumes from
    checkpoint_dir/last.pt when it belongs to this run (same config but RESUME_FREE fields, dial,
    prompts and base model; more steps allowed); another run's checkpoint is moved aside or stops
    the run (config.resume; grpo_dial.train.resume), never overwritten. Non-finite weights, and
    max_nonfinite_steps non-finite steps in a row, stop the run (grpo_dial.train.guard).
    `pass_rates` (passrates schema) sets each prompt's difficulty band for the mass table; None
    bands by the task's difficulty label. `callback(step)` runs after each step's checkpoint
    (tests interrupt a run by raising in it).
    """
    bad = sorted(set(outputs) - set(OUTPUTS))
    if bad:
        raise ValueError(f"unknown output(s) {bad}; valid: {', '.join(OUTPUTS)}")
    if (why := stratum_error(task, dial.strata)) is not None:  # before the model loads
        raise ValueError(why)
    run = _setup(base_model_dir, task, dial, config, pass_rates)
    path = Path(checkpoint_dir) / checkpoint.FILENAME
    state = resume.open_checkpoint(path, run.key, config.steps, config.resume)
    guard.start_checker(run, task)
    if state is not None:
        start = resume.restore(run, state, config.device)
        log.info("resuming from %s after step %d of %d", path, start, config.steps)
    else:
        start = 0
        with autocast(config.precision, config.device):
            run.records["evals"].append(
                evaluate(run.model, run.tokenizer, task, run.heldout, config, 0)
            )
    bar = tqdm(
        range(start + 1, config.steps + 1),
        initial=start,
        total=config.steps,
        disable=not config.progress,
        desc="train",
    )
    for step in bar:
        result = run_step(run, task, dial, config, step)
        guard.check_step(run, result, config, step, path)
        checkpoint.fault_point("step", step)
        last = run.records["steps"][-1]
        bar.set_postfix(
            acc=f"{last['accuracy'][0]:.2f}", silent=f"{last['silent_fraction'][0]:.2f}"
        )
        if _due(step, config.eval_every, config.steps):
            _evaluate(run, task, config, step)
        guard.book_checker(run, task, config, step)
        if _due(step, config.checkpoint_every, config.steps):
            resume.save(run, path, step, config.device)
        if callback is not None:
            callback(step)
    guard.summarize_checker(run, task)
    _write_outputs(run.records, outputs, run.model, run.tokenizer)


def _evaluate(run: RunState, task: Task, config: TrainConfig, step: int) -> None:
    with autocast(config.precision, config.device):
        chunk = evaluate(run.model, run.tokenizer, task, run.heldout, config, step)
    run.records["evals"].append(chunk)
    accuracy = dict(
        zip(zip(chunk["mode"], chunk["difficulty"], strict=True), chunk["accuracy"], strict=True)
    )
    log.info(
        "step %d: held-out accuracy greedy %.3f, sampled %s",
        step,
        accuracy[("greedy", "all")],
        accuracy.get(("sampled", "all"), float("nan")),
    )

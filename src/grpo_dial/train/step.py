"""One RL step's parts: generate and score a batch (with DAPO refill), update, evaluate.

Every advantage, clipping and aggregation comes from grpo_dial.core.advantage; this module only
samples, verifies, calls it and steps the optimizer. Departures from the textbook algorithm:
1. The policy stays in eval mode (no dropout), as TRL's disable_dropout: the first update's
   ratio is then exactly 1 and old log-probs are the current forward, detached.
2. Old log-probs come from the training forward (temperature 1), not from the sampler, so with
   temperature != 1 the first update is slightly off-policy (TRL divides logits by T instead).
3. DAPO dynamic sampling (dial.silent == 'drop'): silent groups are dropped and fresh prompts
   (the next ones in this step's random order of the pool) are sampled in their place, for at
   most dial.max_resample_rounds rounds; the batch may end with fewer than prompts_per_step
   groups. Keep-dials sample once and keep silent groups (zero advantage, but they count in the
   normalizers, as in GRPO and Dr. GRPO).
4. With updates_per_batch > 1 a non-finite later update skips the rest of that batch's updates
   (the earlier ones stay applied).
5. KL to the base (kl_coef > 0) is the k3 estimator exp(d) - d - 1, d = log pi_ref - log pi,
   added per token and aggregated like the loss (TRL's placement).

Learning-rate matching: update_norm is ||theta' - theta|| of one optimizer step on a batch;
lr_match_factor(reference, arm) = reference / arm scales an arm's lr. With SGD the step is
linear in the gradient, so the factor equalizes the update sizes exactly (up to clipping); with
AdamW the first step is ~lr sign(g), nearly independent of the gradient's scale, so the factor is
~1 for every dial: Adam undoes the std factor's global scaling and leaves only its per-prompt
relative weighting.
"""

from __future__ import annotations

import copy
import itertools
import math
from collections.abc import Callable, Iterator
from dataclasses import replace

import numpy as np
import torch
from torch import Tensor

from grpo_dial.core import advantage
from grpo_dial.core.advantage import group_stats, keep_mask, silent_groups
from grpo_dial.core.dial import Dial
from grpo_dial.core.difficulty_anchor import START
from grpo_dial.core.token_weights import lambda_objective, weighted_sum
from grpo_dial.data.tasks.base import Problem, Task
from grpo_dial.policy import activation_record
from grpo_dial.policy.model import autocast
from grpo_dial.policy.rollout import Rollouts, bucket_logprobs, concat, forced, generate_groups
from grpo_dial.train import estimator
from grpo_dial.train import records as rec
from grpo_dial.train.batch import Batch, UpdateResult
from grpo_dial.train.config import TrainConfig


def sampling_rngs(config: TrainConfig) -> tuple[np.random.Generator, torch.Generator]:
    """(prompt-order numpy Generator, sampling torch.Generator on config.device), both seeded
    with config.seed: the run's only sources of randomness."""
    generator = torch.Generator(device=config.device)
    generator.manual_seed(config.seed)
    return np.random.default_rng(config.seed), generator


# --------------------------------------------------------------------------- generate, score


def _prompt_order(pool_size: int, rng: np.random.Generator) -> Iterator[int]:
    """Pool indices in fresh random orders: no prompt repeats within a step unless the step
    needs more prompts than the pool holds."""
    while True:
        yield from rng.permutation(pool_size).tolist()


def score(task: Task, rollouts: Rollouts) -> tuple[Tensor, Tensor, np.ndarray, np.ndarray]:
    """(rewards (N,), truncated (N,), work (N,), redundant (N,)) from the task's verifier, on
    the CPU."""
    finished = rollouts.finished.tolist()
    items = list(zip(rollouts.problems, rollouts.texts, finished, strict=True))
    verdicts = [task.verify(p, t, f) for p, t, f in items]
    splits = [task.length_split(p, t) for p, t, _ in items]
    rewards = torch.tensor([float(v.correct) for v in verdicts])  # (N,) CPU
    truncated = torch.tensor([v.truncated for v in verdicts], dtype=torch.bool)  # (N,)
    work = rec.as_float_array([None if s is None else s.work for s in splits])  # (N,)
    redundant = rec.as_float_array([None if s is None else s.redundant for s in splits])  # (N,)
    return rewards, truncated, work, redundant


def _records(model: torch.nn.Module, config: TrainConfig, rows: int) -> bool:
    """Whether sampling `rows` responses keeps the projection outputs for the update: fp32, a
    policy `activation_record.can_record`s, and their size within config.activation_reuse_mb."""
    if config.precision != "fp32" or not activation_record.can_record(model):
        return False
    size = activation_record.recorded_bytes(model, rows, config.max_new_tokens - 1)
    return size <= config.activation_reuse_mb * 2**20


def sample_batch(
    model: torch.nn.Module,
    tokenizer,
    task: Task,
    pool: list[Problem],
    dial: Dial,
    config: TrainConfig,
    rng: np.random.Generator,
    generator: torch.Generator,
    allocate: Callable[[np.ndarray], np.ndarray] | None = None,
) -> Batch:
    """prompts_per_step prompts x G responses, verified; with silent='drop' refilled (DAPO).

    allocate(pool indices (M,)) -> responses per prompt (M,) replaces the uniform G (adaptive
    allocation); prompts given 0 are not sampled. None: config.group_size for every prompt.
    """
    order = _prompt_order(len(pool), rng)
    rounds = dial.max_resample_rounds if dial.silent == "drop" else 0
    need, parts, scored, drawn = config.prompts_per_step, [], [], []
    for j in range(rounds + 1):
        index = np.fromiter(itertools.islice(order, need), dtype=np.int64, count=need)  # (M,)
        sizes = np.full(need, config.group_size) if allocate is None else allocate(index)
        drawn.append((index, np.asarray(sizes, dtype=np.int64), np.full(need, j)))
        funded = np.flatnonzero(drawn[-1][1] > 0)
        sized = [pool[i] for i in index[funded]], drawn[-1][1][funded].tolist()
        part = generate_groups(
            model,
            tokenizer,
            [pool[i] for i in index[funded]],
            config.group_size if allocate is None else drawn[-1][1][funded].tolist(),
            config.max_new_tokens,
            config.temperature,
            generator,
            generation_batch=config.generation_batch,
            record=_records(model, config, int(drawn[-1][1][funded].sum())),
            check_every=config.alive_check_every,
            prefixes=forced.draw_prefixes(task, *sized, rng),
        )
        parts.append(part)
        scored.append(score(task, part))
        stats = group_stats(scored[-1][0], part.group_ids.cpu())
        need -= int((~silent_groups(stats)).sum())
        if need == 0:
            break
    rollouts = concat(parts)
    group_ids = rollouts.group_ids.cpu()  # (N,)
    rewards = torch.cat([s[0] for s in scored])  # (N,)
    rounds_ = torch.cat([torch.full((len(p),), j, dtype=torch.long) for j, p in enumerate(parts)])
    index, sizes, alloc_rounds = (np.concatenate(x) for x in zip(*drawn, strict=True))
    return Batch(
        rollouts=rollouts,
        group_ids=group_ids,
        rewards=rewards,
        truncated=torch.cat([s[1] for s in scored]),
        work=np.concatenate([s[2] for s in scored]),
        redundant=np.concatenate([s[3] for s in scored]),
        rounds=rounds_,
        trained=keep_mask(rewards, group_ids, dial),
        resampled_prompts=int((alloc_rounds > 0).sum()),
        pool_index=np.repeat(index, sizes),
        drawn_index=index,
        drawn_sizes=sizes,
        drawn_rounds=alloc_rounds,
    )


# --------------------------------------------------------------------------- loss, update


def make_optimizer(model: torch.nn.Module, config: TrainConfig) -> torch.optim.Optimizer:
    params = [p for p in model.parameters() if p.requires_grad]
    lr = config.lr * config.lr_scale
    if config.optimizer == "sgd":
        return torch.optim.SGD(params, lr=lr, weight_decay=config.weight_decay)
    # fused: one kernel for every parameter (CPU and CUDA) instead of ~10 ops per tensor
    fused = all(p.device.type in ("cpu", "cuda") and p.dtype.is_floating_point for p in params)
    return torch.optim.AdamW(
        params, lr=lr, betas=config.betas, weight_decay=config.weight_decay, fused=fused or None
    )


def _update_rows(train: Rollouts, active: Tensor | None) -> tuple[Tensor, Rollouts]:
    """(rows of `train` to forward (B',), those rows): rows outside `active` (B,) bool are
    skipped; None or all True: every row."""
    device = train.response_ids.device
    if active is None or bool(active.all()):
        return torch.arange(len(train), device=device), train
    rows = active.nonzero().squeeze(1)  # (B',)
    return rows, train.select(rows)


def policy_update(
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    train: Rollouts,
    adv: Tensor,
    dial: Dial,
    config: TrainConfig,
    ref_logp: Tensor | None = None,
    lam: torch.nn.Parameter | None = None,
) -> UpdateResult:
    """updates_per_batch optimizer steps on policy_loss (+ kl_coef * KL); skips, and reports,
    a non-finite loss or gradient. `lam`: lambda-GRPO's learnable lambda (in `optimizer`).

    Backward per bucket: the dial's token weights w (B, T) (every normalizer: sequence, token
    or constant) are computed from the whole batch's masks before any forward, so the loss is
    sum_b sum_{i in b, t} w_it l_it over the length buckets b of `bucket_logprobs`; each
    bucket's term is forwarded and backpropagated before the next bucket is forwarded, and the
    gradients accumulate. The update's peak memory is then one bucket's graph (at most
    config.micro_batch rows), whatever the batch; loss and gradient equal the single-backward
    ones to float rounding.

    Without KL, rows with A = 0 (silent groups kept by GRPO / Dr. GRPO) have surrogate 0 and
    gradient 0 at every ratio, so only the other rows are forwarded; they stay in the
    normalizers, so loss and gradient are those of the full batch.

    A learnable lambda enters only lambda-GRPO's response factors f_i(lambda): the policy's
    gradient uses f at the current lambda (weights fixed before the forwards), and lambda's
    gradient is that of sum_i f_i(lambda) L_i / sum |o| with the buckets' per-response loss sums
    L_i (advantage.lambda_objective), taken after the last bucket: together the exact gradient
    of the one loss, with no bucket's graph kept."""
    if len(train) == 0:
        return UpdateResult(math.nan, math.nan, math.nan, True)
    params = [p for p in model.parameters() if p.requires_grad]
    mask = train.response_mask  # (B, T)
    group_ids = train.group_ids.to(mask.device)  # (B,)
    token_weights = advantage.make_token_weights(dial)  # chosen once per call
    weights = forced.free_weights(token_weights(mask, group_ids, lam), train.forced)  # (B, T)
    row_loss = torch.zeros(len(train), dtype=torch.float64, device=mask.device)  # (B,) L_i
    adv = adv.to(mask.device)  # (B,)
    active = (adv != 0) if ref_logp is None else None  # (B,) rows that carry a gradient
    rows, forwarded = _update_rows(train, active)  # (B',), B' rollouts
    old_logp = torch.zeros(mask.shape, device=mask.device)  # (B, T), filled on the first update
    losses, norms, kl_first = [], [], math.nan
    for update in range(config.updates_per_batch):
        optimizer.zero_grad(set_to_none=True)
        if lam is not None and update > 0:  # the last step moved lambda: its weights moved too
            weights = forced.free_weights(token_weights(mask, group_ids, lam), train.forced)
        loss_sum, kl_sum, backward = 0.0, 0.0, False
        buckets = bucket_logprobs(model, forwarded, config.micro_batch)
        while True:
            with autocast(config.precision, config.device):  # forward only; fp32 master weights
                item = next(buckets, None)
            if item is None:
                break
            at, logp = item  # (b,) rows of `forwarded`, (b, tw)
            idx, tw = rows[at], logp.shape[1]  # (b,) rows of `train`
            if update == 0:  # the sampling policy's: ratio 1 on the first update
                old_logp[idx, :tw] = logp.detach()
            w = weights[idx, :tw]  # (b, tw)
            loss = advantage.weighted_policy_loss(logp, old_logp[idx, :tw], adv[idx], w, dial)
            kl_tokens = None
            if ref_logp is not None:
                d = ref_logp[idx, :tw] - logp  # (b, tw)
                kl_tokens = torch.exp(d) - d - 1.0  # (b, tw)
                kl = weighted_sum(kl_tokens, w)
                kl_sum += float(kl.detach())
                loss = loss + config.kl_coef * kl
            if lam is not None:  # L_i of this bucket's rows, for lambda's gradient
                with torch.no_grad():
                    tl = advantage.clipped_surrogate(logp, old_logp[idx, :tw], adv[idx], dial)
                    tl = tl if kl_tokens is None else tl + config.kl_coef * kl_tokens
                    row_loss[idx] = advantage.row_sums(tl, w).double()
            if loss.requires_grad:
                loss.backward()  # frees this bucket's graph before the next forward
                backward = True
            loss_sum += float(loss.detach())
        if lam is not None:  # lambda's gradient, from the loss sums of every bucket
            lambda_objective(row_loss, mask, group_ids, lam, dial.lambda_r).backward()
        if ref_logp is not None and update == 0:
            kl_first = kl_sum
        if not backward:  # every row silent: a zero gradient, which AdamW still steps on
            for p in params:
                p.grad = torch.zeros_like(p)
        norm = torch.nn.utils.clip_grad_norm_(params, config.grad_clip or math.inf)
        losses.append(loss_sum)
        norms.append(float(norm))
        if not (math.isfinite(losses[-1]) and math.isfinite(norms[-1])):
            optimizer.zero_grad(set_to_none=True)
            return UpdateResult(losses[-1], norms[-1], kl_first, False)
        optimizer.step()
    return UpdateResult(float(np.mean(losses)), float(np.mean(norms)), kl_first, True)


# --------------------------------------------------------------------------- evaluation


def evaluate(
    model: torch.nn.Module,
    tokenizer,
    task: Task,
    heldout: list[Problem],
    config: TrainConfig,
    step: int,
) -> dict[str, list]:
    """Held-out accuracy and lengths by difficulty: greedy (temperature 0), then eval_samples
    sampled responses per problem at the training temperature. The sampled pass draws from its
    own generator seeded by (seed, step), never from the training streams, so evaluation does
    not change the run and a resumed run evaluates identically."""
    chunk = config.prompts_per_step * config.group_size
    generator = torch.Generator(device=config.device)
    generator.manual_seed(1_000_003 * (config.seed + 1) + step)
    prefix_rng = np.random.default_rng([config.seed, step])  # a forced core, if the task has one
    modes = [("greedy", 1, 0.0)]
    if config.eval_samples:
        modes.append(("sampled", config.eval_samples, config.temperature))
    rows: dict[str, list] = {}
    for mode, samples, temperature in modes:
        per_call = max(1, chunk // samples)
        correct, lengths, labels = [], [], []
        for lo in range(0, len(heldout), per_call):
            problems = heldout[lo : lo + per_call]
            ro = generate_groups(
                model,
                tokenizer,
                problems,
                samples,
                config.max_new_tokens,
                temperature,
                generator=generator,
                generation_batch=config.generation_batch,
                check_every=config.alive_check_every,
                prefixes=forced.draw_prefixes(task, problems, samples, prefix_rng),
            )
            correct.append(score(task, ro)[0].cpu().numpy())
            lengths.append(rec.lengths_of(ro.texts))
            labels += [p.difficulty for p in ro.problems]
        part = rec.eval_chunk(step, mode, labels, np.concatenate(correct), np.concatenate(lengths))
        for column, values in part.items():
            rows.setdefault(column, []).extend(values)
    return rows


# --------------------------------------------------------------------------- lr matching


def update_norm(
    model: torch.nn.Module,
    batch: Batch,
    dial: Dial,
    config: TrainConfig,
    context: dict | None = None,
) -> float:
    """||theta' - theta|| of ONE optimizer step (fresh optimizer, clipping as configured) on
    `batch`, taken on a deep copy: the live model is untouched. `context`: the strata / anchor
    `advantage.advantages` needs for the dial (train.estimator.context)."""
    clone = copy.deepcopy(model).eval()
    before = [p.detach().clone() for p in clone.parameters()]
    adv = advantage.advantages(batch.rewards, batch.group_ids, dial, **(context or {}))  # (N,)
    train = batch.rollouts.select(batch.trained)
    one = replace(config, updates_per_batch=1)
    result = policy_update(clone, make_optimizer(clone, one), train, adv[batch.trained], dial, one)
    if not result.finite:
        raise ValueError("non-finite loss or gradient on the calibration batch")
    with torch.no_grad():
        sq = sum(
            float((p - b).double().pow(2).sum())
            for p, b in zip(clone.parameters(), before, strict=True)
        )
    return math.sqrt(sq)


def calibration_update_norm(
    model: torch.nn.Module, tokenizer, task: Task, dial: Dial, config: TrainConfig
) -> float:
    """update_norm on the run's own first batch (same pool, seed and sampling as step 1). A
    'prompt' anchor weighs it against the tracker without a prior (every estimate 1/2)."""
    pool = task.problems("train", config.train_pool, config.pool_seed)
    rng, generator = sampling_rngs(config)
    with autocast(config.precision, config.device):
        batch = sample_batch(model, tokenizer, task, pool, dial, config, rng, generator)
    context = estimator.context(dial, batch, task, START, np.full(len(pool), 0.5))
    return update_norm(model, batch, dial, config, context)


def lr_match_factor(reference_norm: float, arm_norm: float) -> float:
    """reference_norm / arm_norm: the lr_scale that gives the arm the reference's step size."""
    for name, v in (("reference_norm", reference_norm), ("arm_norm", arm_norm)):
        if not (isinstance(v, int | float) and math.isfinite(v) and v > 0):
            raise ValueError(f"{name} must be a finite number > 0, got {v!r}")
    return float(reference_norm) / float(arm_norm)

"""Supervised warm start: fit the policy to the task's demonstrations to get a base policy.

Corpus: C = corpus_size training problems, each with one demonstration in a style s drawn with
probability w_s (style_weights, normalized; see `build_corpus`). Example i is the token sequence
    x_i = bos + prompt_i + demo_i + eos
and the loss is the token mean of -log pi(x_it | x_i,<t) over response tokens (demo and eos) of
the batch; bos and prompt tokens are context only. AdamW (decay on matrices only), learning rate
    lr_t = lr (t+1)/W                                          for t < W = warmup_steps
    lr_t = lr (1 + cos(pi (t-W)/(steps-W))) / 2                 afterwards (cosine to 0),
gradient norm clipped. Batches walk through seeded permutations of the corpus (epochs), so a run
is a deterministic function of (task, initial model, config) on CPU. Each batch is cut into
buckets of similar length (rollout.plan_buckets), each forwarded at its own width, whose
gradients of sum(loss) / (batch's loss tokens) add up to the batch mean's: the gradient of one
padded forward up to float rounding, without computing most of the padding.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F
from torch import Tensor
from tqdm import tqdm

from grpo_dial.core.checks import opt as _opt
from grpo_dial.data.prompting import encode_prompts
from grpo_dial.data.tasks.base import Task
from grpo_dial.policy.rollout import FORWARD_OVERHEAD_TOKENS as OVERHEAD
from grpo_dial.policy.rollout import plan_buckets

IGNORE = -100  # label of tokens outside the loss (F.cross_entropy's ignore_index)




@dataclass(frozen=True)
class WarmStartConfig:
    """Supervised warm start of the base policy."""

    steps: int = _opt(
        900, "Optimizer steps. 900 x 64 gives a base accuracy near 0.15 on the multi-operand task."
    )
    batch_size: int = _opt(64, "Examples per step (one demonstration each).")
    lr: float = _opt(3e-3, "Peak AdamW learning rate; tiny models tolerate 1e-3..3e-3.")
    weight_decay: float = _opt(0.01, "AdamW decoupled weight decay, applied to matrices only.")
    warmup_steps: int = _opt(50, "Linear warm-up steps before the cosine decay to zero.")
    seed: int = _opt(0, "Seeds the corpus (problems, styles) and the batch order.")
    corpus_size: int = _opt(
        20000, "Training problems in the corpus; each step draws without replacement per epoch."
    )
    style_weights: tuple[tuple[str, float], ...] | Mapping[str, float] | None = _opt(
        None,
        "Mix of demonstration styles, (style, weight) pairs or a mapping, normalized to sum 1; "
        "None = the task's default mix (uniform if it has none). The mix sets how long base "
        "responses are and how much room RL has to move length without changing correctness.",
    )
    grad_clip: float = _opt(1.0, "Clip the global gradient norm to this value; 0 disables.")
    progress: bool = _opt(True, "Show a tqdm progress bar.")

    def __post_init__(self) -> None:
        for name, lo in (("steps", 1), ("batch_size", 1), ("warmup_steps", 0), ("corpus_size", 1)):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < lo:
                raise ValueError(f"{name} must be an integer >= {lo}, got {v!r}")
        if isinstance(self.seed, bool) or not isinstance(self.seed, int):
            raise ValueError(f"seed must be an integer, got {self.seed!r}")
        for name, positive in (("lr", True), ("weight_decay", False), ("grad_clip", False)):
            v = getattr(self, name)
            ok = isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)
            if not ok or v < 0 or (positive and v == 0):
                raise ValueError(f"{name} must be a finite number {'>' if positive else '>='} 0")
        if not isinstance(self.progress, bool):
            raise ValueError(f"progress must be a bool, got {self.progress!r}")
        if self.style_weights is not None:
            object.__setattr__(self, "style_weights", _normalize(self.style_weights))


def _normalize(weights: object) -> tuple[tuple[str, float], ...]:
    pairs = list(weights.items()) if isinstance(weights, Mapping) else list(weights)
    try:
        styles = [str(s) for s, _ in pairs]
        w = np.array([float(v) for _, v in pairs])  # (S,)
    except (TypeError, ValueError):
        raise ValueError(
            f"style_weights must be (style, weight) pairs or a mapping, got {weights!r}"
        ) from None
    if len(set(styles)) != len(styles):
        raise ValueError(f"style_weights names a style twice: {styles}")
    if not pairs or not np.all(np.isfinite(w)) or np.any(w < 0) or w.sum() <= 0:
        raise ValueError(f"style weights must be finite, >= 0 and not all 0, got {weights!r}")
    return tuple(zip(styles, (w / w.sum()).tolist(), strict=True))


def lr_at(step: int, config: WarmStartConfig) -> float:
    """The module docstring's schedule: linear warm-up, then cosine from lr to 0 at `steps`."""
    w, total = config.warmup_steps, config.steps
    if step < w:
        return config.lr * (step + 1) / w
    frac = (step - w) / max(total - w, 1)
    return config.lr * 0.5 * (1.0 + math.cos(math.pi * min(frac, 1.0)))


def build_corpus(task: Task, config: WarmStartConfig) -> pd.DataFrame:
    """The warm-start corpus: columns prompt_id, style, prompt, demonstration (corpus_size rows).

    A task may offer `corpus(n, seed, style_weights)` -> [(problem, demonstration)], drawing
    train problems with replacement (the arithmetic task: its small levels hold only dozens of
    distinct prompts, so `problems` cannot return 20,000); it is used when present, style_weights
    None meaning the task's own default mix, and the style column is then NA. Otherwise the
    corpus is `problems("train", corpus_size, seed)` with styles drawn by weight (None: uniform).
    """
    pairs = config.style_weights
    unknown = [s for s, _ in pairs or () if s not in task.styles]
    if unknown:
        raise ValueError(
            f"unknown style(s) {', '.join(unknown)} for task {task.name!r}; "
            f"valid: {', '.join(task.styles)}"
        )
    if callable(getattr(task, "corpus", None)):
        drawn = task.corpus(config.corpus_size, config.seed, None if pairs is None else dict(pairs))
        problems, demos = [p for p, _ in drawn], [d for _, d in drawn]
        style_col = pd.array([pd.NA] * len(problems), dtype="string")
    else:
        pairs = pairs or tuple((s, 1.0 / len(task.styles)) for s in task.styles)
        styles = [s for s, _ in pairs]
        rng = np.random.default_rng(config.seed)
        problems = task.problems("train", config.corpus_size, config.seed)
        which = rng.choice(len(styles), size=len(problems), p=[w for _, w in pairs]).tolist()
        style_col = [styles[s] for s in which]
        demos = [task.demonstration(p, s, rng) for p, s in zip(problems, style_col, strict=True)]
    return pd.DataFrame(
        {
            "prompt_id": [p.prompt_id for p in problems],
            "style": style_col,
            "prompt": [p.prompt for p in problems],
            "demonstration": demos,
        }
    )


def encode_examples(tokenizer, prompts: list[str], responses: list[str]) -> tuple[Tensor, Tensor]:
    """Right-padded ids (C, L) of prompt + response + eos, the prompt as RL encodes it (its chat
    template's user turn, else bos + text: data/prompting.encode_prompts), and labels (C, L)
    equal to the ids on response and eos tokens, IGNORE elsewhere (prompt, padding)."""
    eos, pad = tokenizer.eos_token_id, tokenizer.pad_token_id
    if eos is None or pad is None:
        raise ValueError("the tokenizer needs an eos and a pad token for the warm start")
    head = encode_prompts(tokenizer, list(prompts))
    tail = tokenizer(list(responses), add_special_tokens=False)["input_ids"]
    seqs, n_ctx = [], []
    for h, t in zip(head, tail, strict=True):
        seqs.append(h + t + [eos])
        n_ctx.append(len(h))
    lengths = np.array([len(s) for s in seqs])  # (C,)
    ids = np.full((len(seqs), lengths.max()), pad, dtype=np.int64)  # (C, L)
    ids[np.arange(lengths.max()) < lengths[:, None]] = np.concatenate(seqs)
    pos = np.arange(lengths.max())[None, :]  # (1, L)
    in_loss = (pos >= np.array(n_ctx)[:, None]) & (pos < lengths[:, None])  # (C, L)
    labels = np.where(in_loss, ids, IGNORE)  # (C, L)
    return torch.from_numpy(ids), torch.from_numpy(labels)


def _batches(n: int, size: int, rng: np.random.Generator):
    """Index batches walking through fresh permutations of range(n), forever."""
    order, at = rng.permutation(n), 0
    while True:
        take = []
        while len(take) < size:
            if at == n:
                order, at = rng.permutation(n), 0
            k = min(size - len(take), n - at)
            take.extend(order[at : at + k].tolist())
            at += k
        yield take


def _sum_loss(model, ids: Tensor, labels: Tensor, lengths: Tensor, rows, n_tokens: int) -> float:
    """Backward of sum(-log pi over the loss tokens of `rows`) / n_tokens at the rows' own width
    (their longest example): the batch's token mean, one bucket's share; returns that share."""
    idx = torch.as_tensor(rows, device=ids.device)
    width = int(lengths[idx].max())
    x, y = ids[idx, :width], labels[idx, :width]  # (b, L)
    attn = torch.arange(width, device=ids.device) < lengths[idx, None]  # (b, L)
    logits = model(input_ids=x, attention_mask=attn.long()).logits
    logits = logits[:, :-1].float()  # (b, L-1, V) predicts x[:, 1:]
    target = y[:, 1:]  # (b, L-1)
    loss = F.cross_entropy(
        logits.flatten(0, 1), target.flatten(), ignore_index=IGNORE, reduction="sum"
    )
    loss = loss / n_tokens
    loss.backward()
    return float(loss.detach())


def warm_start(task: Task, model, tokenizer, config: WarmStartConfig) -> pd.DataFrame:
    """Train `model` in place on the task's demonstrations; returns the loss curve.

    Columns: step (0-based), loss (mean over the step's response tokens), lr, tokens
    (cumulative response tokens trained on), seconds (cumulative wall time).
    """
    corpus = build_corpus(task, config)
    ids, labels = encode_examples(tokenizer, corpus["prompt"].tolist(), corpus["demonstration"])
    limit = getattr(model.config, "max_position_embeddings", None)
    if limit is not None and ids.shape[1] > limit:
        raise ValueError(f"a warm-start example has {ids.shape[1]} tokens > model limit {limit}")
    device = next(model.parameters()).device
    ids, labels = ids.to(device), labels.to(device)
    # eos is the last real token and always in the loss: length = its position + 1
    lengths = (labels != IGNORE).long().cumsum(1).argmax(1) + 1  # (C,)
    lengths_np = lengths.cpu().numpy()  # (C,)
    zeros = np.zeros_like(lengths_np)
    in_loss = (labels[:, 1:] != IGNORE).sum(1).cpu().numpy()  # (C,) loss tokens per example
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(
        [
            {"params": [p for p in params if p.dim() >= 2], "weight_decay": config.weight_decay},
            {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0},
        ],
        lr=config.lr,
    )
    rng = np.random.default_rng([config.seed, 1])  # batch order, independent of the corpus draw
    batches = _batches(len(corpus), config.batch_size, rng)
    rows, tokens, start = [], 0, time.perf_counter()
    was_training = model.training
    model.train()
    bar = tqdm(range(config.steps), desc="warm start", disable=not config.progress)
    try:
        for step in bar:
            batch = np.asarray(next(batches))  # (B,)
            lr = lr_at(step, config)
            for group in opt.param_groups:
                group["lr"] = lr
            opt.zero_grad(set_to_none=True)
            n_tokens = int(in_loss[batch].sum())  # the batch's loss tokens: the mean's divisor
            total = 0.0
            for part in plan_buckets(zeros[batch], lengths_np[batch], len(batch), OVERHEAD):
                total += _sum_loss(model, ids, labels, lengths, batch[part], n_tokens)
            if config.grad_clip > 0:
                torch.nn.utils.clip_grad_norm_(params, config.grad_clip)
            opt.step()
            tokens += n_tokens
            rows.append((step, total, lr, tokens, time.perf_counter() - start))
            if step % 10 == 0:
                bar.set_postfix(loss=f"{rows[-1][1]:.3f}", lr=f"{lr:.2e}")
    finally:
        bar.close()
        model.train(was_training)
    return pd.DataFrame(rows, columns=["step", "loss", "lr", "tokens", "seconds"])

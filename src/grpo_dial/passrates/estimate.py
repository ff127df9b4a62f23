"""Pass rates of a policy: n samples per prompt, verified, as a pass-rate table.

For prompt j, k_j of n sampled responses are correct and p_hat_j = k_j / n, with the Wilson score
interval (z = Phi^-1(1 - (1 - confidence)/2)):
    center = (p_hat + z^2/(2n)) / (1 + z^2/n)
    half   = z sqrt(p_hat (1 - p_hat)/n + z^2/(4 n^2)) / (1 + z^2/n)
    [lo, hi] = [center - half, center + half]             (lo = 0 at k = 0, hi = 1 at k = n)
Lengths are characters of the decoded response text; the work / redundant split comes from
`task.length_split` and is NaN where the task cannot tell.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import torch
from scipy.stats import norm
from tqdm import tqdm

from grpo_dial.data.tasks.base import Problem, Task
from grpo_dial.passrates.tables import validate_passrates
from grpo_dial.policy.rollout import forced, generate_groups

EXTRA_COLUMNS = (
    "wilson_lo",
    "wilson_hi",
    "truncated_rate",
    "mean_work_correct",
    "mean_redundant_correct",
    "mean_work_incorrect",
    "mean_redundant_incorrect",
)


def wilson_interval(k, n, confidence: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
    """Wilson score interval for k successes in n trials (broadcast arrays); see module doc."""
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence!r}")
    k, n = np.broadcast_arrays(np.asarray(k, dtype=float), np.asarray(n, dtype=float))
    if np.any(n < 1) or np.any(k < 0) or np.any(k > n):
        raise ValueError("wilson_interval needs n >= 1 and 0 <= k <= n")
    z2 = norm.ppf(0.5 + confidence / 2) ** 2
    p = k / n
    denom = 1 + z2 / n
    center = (p + z2 / (2 * n)) / denom
    half = np.sqrt(z2 * (p * (1 - p) / n + z2 / (4 * n**2))) / denom
    lo = np.where(k == 0, 0.0, np.clip(center - half, 0.0, 1.0))
    hi = np.where(k == n, 1.0, np.clip(center + half, 0.0, 1.0))
    return lo, hi


def _group_mean(values: np.ndarray, row: np.ndarray, mask: np.ndarray, m: int) -> np.ndarray:
    """Mean of values[mask] per row id in 0..m-1; NaN where a row has none."""
    total = np.bincount(row[mask], weights=values[mask], minlength=m)  # (M,)
    count = np.bincount(row[mask], minlength=m)  # (M,)
    return np.divide(total, count, out=np.full(m, np.nan), where=count > 0)


def estimate_pass_rates(
    model,
    tokenizer,
    task: Task,
    problems: list[Problem],
    n_samples: int = 32,
    max_new_tokens: int = 48,
    temperature: float = 1.0,
    seed: int = 0,
    prompts_per_batch: int = 32,
    progress: bool = True,
) -> pd.DataFrame:
    """A validated pass-rate table (PASSRATE_COLUMNS, then EXTRA_COLUMNS), one row per problem
    in input order. source = task.name. All samples come from one torch.Generator seeded with
    `seed` on the model's device, drawn batch after batch: the table is a function of the
    inputs, including `prompts_per_batch` (a different batching draws different samples)."""
    for name, v in (("n_samples", n_samples), ("prompts_per_batch", prompts_per_batch)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ValueError(f"{name} must be an integer >= 1, got {v!r}")
    if not problems:
        raise ValueError("estimate_pass_rates needs at least one problem")
    ids = pd.Series([p.prompt_id for p in problems])
    if ids.duplicated().any():
        raise ValueError(f"duplicate prompt_id {ids[ids.duplicated()].iloc[0]!r} among problems")
    device = next(model.parameters()).device
    generator = torch.Generator(device=device).manual_seed(int(seed))
    prefix_rng = np.random.default_rng(int(seed))  # a task's forced cores (rollout/forced.py)

    correct, truncated, length, work, redundant = [], [], [], [], []
    starts = range(0, len(problems), prompts_per_batch)
    for lo in tqdm(starts, desc="pass rates", disable=not progress):
        batch = problems[lo : lo + prompts_per_batch]
        r = generate_groups(
            model, tokenizer, batch, n_samples, max_new_tokens, temperature, generator,
            prefixes=forced.draw_prefixes(task, batch, n_samples, prefix_rng),
        )  # fmt: skip
        finished = r.finished.tolist()
        for prob, text, fin in zip(r.problems, r.texts, finished, strict=True):
            verdict = task.verify(prob, text, fin)
            split = task.length_split(prob, text)
            correct.append(verdict.correct)
            truncated.append(not fin)
            length.append(len(text))
            work.append(np.nan if split is None else split.work)
            redundant.append(np.nan if split is None else split.redundant)

    m = len(problems)
    row = np.repeat(np.arange(m), n_samples)  # (R,) rows were generated in problem order
    ok = np.array(correct, dtype=bool)  # (R,)
    k = np.bincount(row, weights=ok, minlength=m).astype(np.int64)  # (M,)
    lo_ci, hi_ci = wilson_interval(k, n_samples)
    length, work, redundant = (np.array(x, dtype=float) for x in (length, work, redundant))
    table = pd.DataFrame(
        {
            "prompt_id": ids,
            "source": task.name,
            "difficulty": [p.difficulty for p in problems],
            "n": n_samples,
            "k": k,
            "p_hat": k / n_samples,
            "mean_len_correct": _group_mean(length, row, ok, m),
            "mean_len_incorrect": _group_mean(length, row, ~ok, m),
            "wilson_lo": lo_ci,
            "wilson_hi": hi_ci,
            "truncated_rate": np.bincount(row, weights=np.array(truncated, float), minlength=m)
            / n_samples,
            "mean_work_correct": _group_mean(work, row, ok & ~np.isnan(work), m),
            "mean_redundant_correct": _group_mean(redundant, row, ok & ~np.isnan(redundant), m),
            "mean_work_incorrect": _group_mean(work, row, ~ok & ~np.isnan(work), m),
            "mean_redundant_incorrect": _group_mean(redundant, row, ~ok & ~np.isnan(redundant), m),
        }
    )
    return validate_passrates(table)

"""The tidy tables of an RL run, built from one step's tensors; pure, no I/O.

Records are kept as plain containers (table name -> list of column chunks, each a dict of
column -> list of Python scalars) so a checkpoint stores them under `torch.load(weights_only=True)`
and a resumed run appends to them; `to_frames` turns them into DataFrames at the end.

Per-step statistics describe the FIRST sampling round only (the prompts_per_step random training
prompts every dial sees), so accuracy and lengths compare across dials; DAPO's refill rounds are
biased toward informative prompts. The responses table holds every generated response with its
`resample_round` and `trained` flag, so any other cut can be made from it.

Gradient mass of a group (the identity's scalar, docs/design-notes.md#the-identity): with
population sigma_p, the dial's std sigma_d (ddof) and eps,
    (1/G) sum_i A_i s_i = sigma_p^2 / (sigma_d + eps)^alpha (s+ - s-),
so the group's mass is m_g = sigma_p^2 / (sigma_d + eps)^alpha (= sigma^(2-alpha) at ddof 0,
eps 0); it is computed through advantage.group_update with scores s_i = r_i - mean_g, for which
s+ - s- = 1. The realized mass share of a band is the sum of m_g over the TRAINED groups in the
band over the sum over all trained groups (dropped silent groups carry no mass anyway).

Tables (lengths in characters of the response text unless named `tokens`):
    steps      one row per step. loss is the surrogate's value, which at ratio 1 is minus the
               aggregated advantage (near 0), not a log-likelihood; grad_norm is before clipping;
               loss and grad_norm are NaN when no group was trained (DAPO, all silent); kl is NaN
               when kl_coef = 0; samples counts every generated response incl. refills;
               wall_seconds excludes the identity probe; checker_* count the answer
               checker's timeouts, errors, crashed workers and unparsable references since
               the previous row (0 for tasks without a counting verifier; grpo_dial.train.guard).
    mass       one row per (step, band); band = pass-rate band of the prompt's base p_hat
               (grpo_dial.core.bands, UNRATED if the table lacks it) or, without a table,
               its difficulty label; share NaN when the step's total mass is 0.
    responses  one row per generated response; group numbers restart every step; k and G of its
               group; work / redundant NaN where the task cannot split.
    evals      greedy held-out accuracy per difficulty label plus 'all', at step 0, every
               eval_every steps and the last.
    allocation one row per prompt drawn (every round, sampled or not): the running pass-rate
               estimate it was allocated on (before this step's update), whether it counted as
               unanimous, and G, the responses it got (0: not sampled); band as in mass.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
import torch
from torch import Tensor

from grpo_dial.core.advantage import group_stats, group_update
from grpo_dial.core.bands import PASS_RATE_BANDS, UNRATED, pass_rate_band
from grpo_dial.core.dial import Dial
from grpo_dial.core.estimators import advantage_estimators, log_columns, logged_values

if TYPE_CHECKING:
    from grpo_dial.train.batch import Batch, UpdateResult

STEP_BASE_COLUMNS = (
    "step accuracy mean_len mean_len_correct mean_len_incorrect mean_work_correct "
    "mean_redundant_correct mean_work_incorrect mean_redundant_incorrect truncation_rate "
    "silent_fraction all_correct_fraction all_wrong_fraction trained_groups resampled_prompts "
    "samples loss grad_norm lr kl wall_seconds nonfinite checker_timeouts checker_errors "
    "checker_crashes checker_bad_references"
).split()


def step_columns() -> tuple[str, ...]:
    """The steps table's columns: the base ones, then every registered estimator's
    (core.estimators.log_columns, e.g. lambda, strata_cells, strata_split_groups, anchor)."""
    return (*STEP_BASE_COLUMNS, *log_columns())
MASS_COLUMNS = ("step", "band", "n_groups", "mass", "share")
RESPONSE_COLUMNS = (
    "step group prompt_id difficulty k G reward length tokens truncated advantage work redundant "
    "resample_round trained prefix"
).split()
EVAL_COLUMNS = (
    "step mode difficulty n accuracy mean_len mean_len_correct mean_len_incorrect".split()
)
ALLOCATION_COLUMNS = (
    "step prompt_id band resample_round p_estimate unanimous G".split()
)
TABLES = ("steps", "mass", "responses", "evals", "identity", "allocation")

Records = dict[str, list[dict[str, list]]]


def new_records() -> Records:
    return {name: [] for name in TABLES}


def to_frames(records: Records, columns: dict[str, tuple[str, ...]]) -> dict[str, pd.DataFrame]:
    """One DataFrame per table, columns in the documented order (empty tables keep them)."""
    return {
        name: (
            pd.concat([pd.DataFrame(c) for c in chunks], ignore_index=True)
            if chunks
            else pd.DataFrame(columns=list(columns[name]))
        )[list(columns[name])]
        for name, chunks in records.items()
    }


# --------------------------------------------------------------------------- bands


def band_map(
    prompt_ids: list[str], difficulties: list[str], pass_rates: pd.DataFrame | None
) -> tuple[dict[str, str], tuple[str, ...]]:
    """(prompt_id -> band, band vocabulary). Without a table the band is the difficulty label;
    with one, the pass-rate band of the prompt's p_hat, UNRATED for prompts it does not list."""
    if pass_rates is None:
        labels = [str(d) for d in difficulties]
        return dict(zip(prompt_ids, labels, strict=True)), tuple(sorted(set(labels)))
    for col in ("prompt_id", "p_hat"):
        if col not in pass_rates.columns:
            raise ValueError(f"pass_rates table lacks column {col!r}")
    table = dict(
        zip(pass_rates["prompt_id"].astype(str), pass_rate_band(pass_rates["p_hat"]), strict=True)
    )
    bands = {pid: str(table.get(pid, UNRATED)) for pid in prompt_ids}
    vocab = PASS_RATE_BANDS + ((UNRATED,) if UNRATED in bands.values() else ())
    return bands, vocab


# --------------------------------------------------------------------------- per step


def _mean(x: np.ndarray) -> float:
    x = x[~np.isnan(x)]
    return float(x.mean()) if x.size else math.nan


def step_stats(
    rewards: Tensor,
    group_ids: Tensor,
    lengths: np.ndarray,
    truncated: Tensor,
    work: np.ndarray,
    redundant: np.ndarray,
) -> dict[str, float]:
    """Accuracy, lengths by correctness (work / redundant split too), truncation and silent
    fractions (all-correct and all-wrong) of one sampling round."""
    r = rewards.cpu().numpy().astype(bool)  # (N,)
    stats = group_stats(rewards, group_ids)
    k, g = stats.k.cpu().numpy(), stats.size.cpu().numpy()  # (M,)
    lengths = lengths.astype(float)
    return {
        "accuracy": float(r.mean()),
        "mean_len": float(lengths.mean()),
        "mean_len_correct": _mean(np.where(r, lengths, np.nan)),
        "mean_len_incorrect": _mean(np.where(~r, lengths, np.nan)),
        "mean_work_correct": _mean(np.where(r, work, np.nan)),
        "mean_redundant_correct": _mean(np.where(r, redundant, np.nan)),
        "mean_work_incorrect": _mean(np.where(~r, work, np.nan)),
        "mean_redundant_incorrect": _mean(np.where(~r, redundant, np.nan)),
        "truncation_rate": float(truncated.float().mean()),
        "silent_fraction": float(((k == 0) | (k == g)).mean()),
        "all_correct_fraction": float((k == g).mean()),
        "all_wrong_fraction": float((k == 0).mean()),
    }


def group_mass(
    rewards: Tensor, group_ids: Tensor, dial: Dial, adv: Tensor | None = None
) -> tuple[Tensor, Tensor]:
    """(ids (M,), m_g (M,)): the identity's scalar sigma_p^2 / (sigma_d + eps)^alpha per group,
    via advantage.group_update with scores r_i - mean_g (so s+ - s- = 1); 0 for silent groups.
    With the step's advantages `adv` (N,) (strata, anchor): sum_i A_i (r_i - mean_g) / G_g."""
    r = rewards.double()  # (N,)
    stats = group_stats(r, group_ids)
    centred = (r - stats.mean[stats.index])[:, None]  # (N, 1)
    if adv is None:
        return stats.ids, group_update(centred, r, group_ids, dial)[:, 0]  # (M,), (M,)
    w = adv.double() / stats.size[stats.index]  # (N,)
    return stats.ids, r.new_zeros(len(stats.ids)).index_add_(0, stats.index, w * centred[:, 0])


def estimator_stats(dial: Dial, inputs: Mapping[str, object], batch: Batch) -> dict[str, float]:
    """The per-step columns the registered estimators add (core.estimators.logged_values): each
    active one's `log` on the inputs gathered for it (`lambda`: the step's lambda), NaN for the
    others; e.g. lambda-GRPO's lambda, HA-DW's anchor (the mean over groups for 'prompt'), the
    (group, stratum) cells of the batch and the groups split into more than one stratum."""
    return logged_values(dial, inputs, batch)


def mass_chunk(
    step: int, group_band: list[str], mass: np.ndarray, vocab: tuple[str, ...]
) -> dict[str, list]:
    """One row per band of `vocab`: trained groups, summed mass, share of the step's mass."""
    code = {b: i for i, b in enumerate(vocab)}
    idx = np.array([code[b] for b in group_band], dtype=np.int64)  # (M,)
    n = np.bincount(idx, minlength=len(vocab))  # (bands,)
    total = np.bincount(idx, weights=mass, minlength=len(vocab))  # (bands,)
    share = total / total.sum() if total.sum() > 0 else np.full(len(vocab), np.nan)
    return {
        "step": [step] * len(vocab),
        "band": list(vocab),
        "n_groups": n.tolist(),
        "mass": total.tolist(),
        "share": share.tolist(),
    }


def response_chunk(step: int, columns: dict[str, object]) -> dict[str, list]:
    """Columns of RESPONSE_COLUMNS (all but step) as arrays / tensors / lists -> plain lists."""
    n = len(columns["prompt_id"])
    out = {"step": [step] * n}
    for name in RESPONSE_COLUMNS[1:]:
        v = columns[name]
        if isinstance(v, Tensor):
            v = v.detach().cpu().numpy()
        out[name] = v.tolist() if isinstance(v, np.ndarray) else list(v)
    return out


def eval_chunk(
    step: int, mode: str, difficulty: list[str], correct: np.ndarray, lengths: np.ndarray
) -> dict[str, list]:
    """Held-out accuracy and mean lengths by difficulty label, plus an 'all' row; `mode` is
    'greedy' or 'sampled'. n counts responses (problems x samples)."""
    diff = np.asarray(difficulty, dtype=object)
    labels = sorted(set(difficulty)) + ["all"]
    rows = {c: [] for c in EVAL_COLUMNS}
    for label in labels:
        sel = np.ones(len(diff), bool) if label == "all" else diff == label
        c, n = correct[sel].astype(bool), lengths[sel].astype(float)
        values = (
            step,
            mode,
            label,
            int(sel.sum()),
            float(c.mean()),
            float(n.mean()),
            _mean(np.where(c, n, np.nan)),
            _mean(np.where(~c, n, np.nan)),
        )
        for col, v in zip(EVAL_COLUMNS, values, strict=True):
            rows[col].append(v)
    return rows


def as_float_array(values: list[float | None]) -> np.ndarray:
    return np.array([math.nan if v is None else float(v) for v in values], dtype=float)


def lengths_of(texts: list[str]) -> np.ndarray:
    return np.fromiter((len(t) for t in texts), dtype=np.int64, count=len(texts))


def record_step(
    records: Records,
    step: int,
    batch: Batch,
    adv: Tensor,
    result: UpdateResult,
    dial: Dial,
    bands: dict[str, str],
    vocab: tuple[str, ...],
    lr: float,
    wall: float,
    extras: dict[str, float] | None = None,
) -> None:
    """Append one step's rows to `steps`, `mass` and `responses` (adv: (N,) of every response;
    extras: `estimator_stats`, NaN columns when None)."""
    ro, gid, first, trained = batch.rollouts, batch.group_ids, batch.rounds == 0, batch.trained
    lengths = lengths_of(ro.texts)  # (N,)
    first_np = first.numpy()  # (N,)
    row = {
        "step": step,
        **step_stats(
            batch.rewards[first],
            gid[first],
            lengths[first_np],
            batch.truncated[first],
            batch.work[first_np],
            batch.redundant[first_np],
        ),
        "trained_groups": int(torch.unique(gid[trained]).numel()),
        "resampled_prompts": batch.resampled_prompts,
        "samples": len(ro),
        "loss": result.loss,
        "grad_norm": result.grad_norm,
        "lr": lr,
        "kl": result.kl,
        "wall_seconds": wall,
        "nonfinite": not result.finite,
        # filled by grpo_dial.train.guard.book_checker for tasks whose verifier counts
        "checker_timeouts": 0,
        "checker_errors": 0,
        "checker_crashes": 0,
        "checker_bad_references": 0,
        **(extras or dict.fromkeys(log_columns(), math.nan)),
    }
    records["steps"].append({k: [v] for k, v in row.items()})

    group_band, mass = [], np.zeros(0)
    if trained.any():
        # the arm's own advantages where a registered estimator reweights them; else the
        # closed path in float64 (the step's adv is in the rewards' dtype)
        reweighted = bool(advantage_estimators(dial))
        own = adv[trained] if reweighted else None
        ids, m = group_mass(batch.rewards[trained], gid[trained], dial, own)  # (M,), (M,)
        prompt_of = dict(zip(gid.tolist(), (p.prompt_id for p in ro.problems), strict=True))
        group_band, mass = [bands[prompt_of[g]] for g in ids.tolist()], m.numpy()
    records["mass"].append(mass_chunk(step, group_band, mass, vocab))

    stats = group_stats(batch.rewards, gid)
    columns = {
        "group": gid,
        "prompt_id": [p.prompt_id for p in ro.problems],
        "difficulty": [p.difficulty for p in ro.problems],
        "k": stats.k[stats.index].long(),
        "G": stats.size[stats.index],
        "reward": batch.rewards,
        "length": lengths,
        "tokens": ro.response_lengths,
        "truncated": batch.truncated,
        "advantage": adv,
        "work": batch.work,
        "redundant": batch.redundant,
        "resample_round": batch.rounds,
        "trained": trained,
        "prefix": ro.prefixes or [""] * len(ro),  # a task's forced core (rollout/forced.py)
    }
    records["responses"].append(response_chunk(step, columns))


def allocation_chunk(
    step: int,
    batch: Batch,
    prompt_ids: list[str],
    bands: dict[str, str],
    estimate: np.ndarray,
    unanimous: np.ndarray,
) -> dict[str, list]:
    """Rows of the allocation table for one step (estimate, unanimous: (J,) over the pool)."""
    ids = [prompt_ids[i] for i in batch.drawn_index.tolist()]
    return {
        "step": [step] * len(ids),
        "prompt_id": ids,
        "band": [bands[i] for i in ids],
        "resample_round": batch.drawn_rounds.tolist(),
        "p_estimate": estimate[batch.drawn_index].tolist(),
        "unanimous": unanimous[batch.drawn_index].tolist(),
        "G": batch.drawn_sizes.tolist(),
    }

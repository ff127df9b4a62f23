"""A TRL run's logged completions as the very tables the own trainer writes.

The trl backend's GRPOTrainer logs every completion (`log_completions`, one
`completions/completions_<step>.parquet` per step) with the verifier's reward, TRL's advantage
and, through the reward function's `log_extra`, what only the verifier knows: the problem's
prompt_id and difficulty, completion tokens, truncation, the task's work / redundant split.
`grpo_dial.external.importers.import_trl` reads them (snapshots, groups, k and G: parsed once,
there); this module renames and derives:

    responses  records.RESPONSE_COLUMNS: every completion, group numbers per step, trained True
               (TRL trains every group, silent ones with A = 0), resample_round 0
    steps      records.step_columns(): records.step_stats of the step's completions, loss /
               grad_norm / lr / kl from TRL's log_history, wall seconds from the run's callback;
               every registered estimator's column NaN (the backend refuses them), checker_* 0.
               kl is TRL's k3 KL to the base at the batch's first update (the sampling policy,
               as the own trainer's): the token mean of each micro-batch (over processes),
               averaged over the micro-batches; the own trainer weights it by the dial's
               normalizer, so the two are one number for a token-mean dial in one micro-batch
    mass       records.group_mass and mass_chunk of the step's groups, banded as the own run
    allocation one row per group: G = num_generations, p_estimate NaN (no running tracker)
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from grpo_dial.backends.trl.config import batch_of
from grpo_dial.core.dial import Dial
from grpo_dial.core.estimators import log_columns
from grpo_dial.train import records as rec

# logged by the reward function (log_extra)
EXTRA = ("problem_id", "tokens", "truncated", "task_work", "task_redundant")
REWARD = "verifier"  # the reward function's name: TRL's column of its rewards


def import_completions(run_dir: str | Path, group_size: int) -> pd.DataFrame:
    """The run's completions through import_trl (RESPONSE_COLUMNS of external, then EXTRA)."""
    from grpo_dial.external.importers import import_trl

    table, _ = import_trl(
        run_dir, reward_column=REWARD, threshold=0.5, group_size=group_size, extra=EXTRA
    )
    return table


def responses_table(imported: pd.DataFrame, updates: int = 1) -> pd.DataFrame:
    """records.RESPONSE_COLUMNS from the imported completions. TRL logs a batch at each of its
    `updates` optimizer steps; the importer keeps the first (the rest repeat it), at optimizer
    step g: the own trainer's step batch_of(g, updates)."""
    out = pd.DataFrame(
        {
            "step": [batch_of(int(g), updates) for g in imported["step"]],
            "group": imported["group"].astype(np.int64),
            "prompt_id": imported["problem_id"].astype(str),
            "difficulty": imported["difficulty"].astype(object),
            "k": imported["k"].astype(np.int64),
            "G": imported["G"].astype(np.int64),
            "reward": imported["reward"].astype(float),
            "length": imported["length"].astype(np.int64),
            "tokens": imported["tokens"].astype(np.int64),
            "truncated": imported["truncated"].astype(bool),
            "advantage": imported["advantage"].astype(float),
            "work": pd.to_numeric(imported["task_work"]).astype(float),
            "redundant": pd.to_numeric(imported["task_redundant"]).astype(float),
            "resample_round": np.int64(0),
            "trained": True,
            "prefix": "",  # no forced core: TRL samples every response token (rollout/forced.py)
        }
    )
    return out[list(rec.RESPONSE_COLUMNS)]


def _history(log_history: list[dict], updates: int = 1) -> dict[int, dict]:
    """TRL's training log (one entry per optimizer step) by the own trainer's step, as it
    reports a batch's `updates` updates: loss and grad_norm their mean, learning_rate and kl
    the first update's (kl: the policy that sampled the batch against the base; later updates
    measure the policy the batch has already moved)."""
    by_step: dict[int, list[dict]] = {}
    for entry in log_history:
        if "loss" in entry and isinstance(entry.get("step"), int):
            by_step.setdefault(batch_of(entry["step"], updates), []).append(entry)
    out = {}
    for step, entries in by_step.items():
        out[step] = {**entries[0], **{
            name: float(np.mean([e.get(name, math.nan) for e in entries]))
            for name in ("loss", "grad_norm")
        }}  # fmt: skip
    return out


def run_tables(
    responses: pd.DataFrame,
    dial: Dial,
    log_history: list[dict],
    walls: Mapping[int, float],
    bands: Mapping[str, str],
    vocab: tuple[str, ...],
    updates: int = 1,
) -> dict[str, pd.DataFrame]:
    """steps, mass and allocation tables (records' columns) from the responses table; updates:
    TRL's optimizer steps per batch (num_iterations), log_history's steps per own step."""
    history = _history(log_history, updates)
    steps, mass, allocation = [], rec.new_records()["mass"], []
    for step, rows in responses.groupby("step", sort=True):
        gid = torch.tensor(rows["group"].to_numpy())  # (N,)
        rewards = torch.as_tensor(rows["reward"].to_numpy(), dtype=torch.float32)  # (N,)
        stats = rec.step_stats(
            rewards,
            gid,
            rows["length"].to_numpy(),
            torch.as_tensor(rows["truncated"].to_numpy()),
            rows["work"].to_numpy(),
            rows["redundant"].to_numpy(),
        )
        entry = history.get(int(step), {})
        loss = float(entry.get("loss", math.nan))
        steps.append(
            {
                "step": int(step),
                **stats,
                "trained_groups": int(rows["group"].nunique()),
                "resampled_prompts": 0,
                "samples": len(rows),
                "loss": loss,
                "grad_norm": float(entry.get("grad_norm", math.nan)),
                "lr": float(entry.get("learning_rate", math.nan)),
                "kl": float(entry.get("kl", math.nan)),
                "wall_seconds": float(walls.get(int(step), math.nan)),
                "nonfinite": not math.isfinite(loss) if entry else False,
                "checker_timeouts": 0,
                "checker_errors": 0,
                "checker_crashes": 0,
                "checker_bad_references": 0,
                **dict.fromkeys(log_columns(), math.nan),  # the trl backend refuses them all
            }
        )
        ids, m = rec.group_mass(rewards, gid, dial)  # (M,), (M,)
        prompt_of = dict(zip(rows["group"], rows["prompt_id"], strict=True))
        group_band = [bands.get(prompt_of[g], rec.UNRATED) for g in ids.tolist()]
        mass.append(rec.mass_chunk(int(step), group_band, m.numpy(), vocab))
        first = rows.drop_duplicates("group")
        allocation.append(
            pd.DataFrame(
                {
                    "step": int(step),
                    "prompt_id": first["prompt_id"].to_numpy(),
                    "band": [bands.get(p, rec.UNRATED) for p in first["prompt_id"]],
                    "resample_round": np.int64(0),
                    "p_estimate": math.nan,
                    "unanimous": False,
                    "G": first["G"].to_numpy(np.int64),
                }
            )
        )
    frames = rec.to_frames({"mass": mass}, {"mass": rec.MASS_COLUMNS})
    return {
        "steps": pd.DataFrame(steps, columns=list(rec.step_columns())),
        "mass": frames["mass"],
        "allocation": pd.concat(allocation, ignore_index=True)[list(rec.ALLOCATION_COLUMNS)]
        if allocation
        else pd.DataFrame(columns=list(rec.ALLOCATION_COLUMNS)),
    }

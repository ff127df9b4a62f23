"""What one RL run holds between steps (`RunState`): everything its checkpoint restores."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

from grpo_dial.core.difficulty_anchor import START, AnchorState
from grpo_dial.data.tasks.base import Problem
from grpo_dial.train import records as rec


@dataclass
class RunState:
    """What one run holds between steps; everything the checkpoint must restore is here."""

    model: torch.nn.Module
    tokenizer: object
    ref_model: torch.nn.Module | None  # frozen base for the KL term; None when kl_coef = 0
    optimizer: torch.optim.Optimizer
    rng: np.random.Generator  # prompt order
    generator: torch.Generator  # sampling
    pool: list[Problem]
    heldout: list[Problem]
    bands: dict[str, str]  # prompt_id -> difficulty band of the mass table
    vocab: tuple[str, ...]  # every band, in table order
    key: dict  # what a checkpoint must match to be resumed
    tracker: tuple[np.ndarray, np.ndarray]  # running pass-rate counts (a, b) over the pool
    records: rec.Records = field(default_factory=rec.new_records)
    nonfinite: int = 0  # CONSECUTIVE steps skipped for a non-finite loss or gradient, up to now
    saved_step: int | None = None  # step of the last checkpoint written or resumed (None: none)
    checker_seen: dict[str, int] = field(default_factory=dict)  # verifier tallies already booked
    lam: torch.nn.Parameter | None = None  # lambda-GRPO's learnable lambda (in the optimizer)
    anchor: AnchorState = START  # HA-DW's batch difficulty anchor (train.estimator)

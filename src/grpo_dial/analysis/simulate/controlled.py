"""The paper's controlled run: one-parameter Bernoulli-logit prompts under GRPO-style updates.

Each prompt j is a policy with one logit, p_j = sigmoid(theta_j). Every step it samples a group of
G rewards r_i ~ Bernoulli(p_j); the score of a response is d/dtheta log pi(r_i) = r_i - p_j, and

    theta_j += lr * (1/G) sum_i A_i (r_i - p_j)           (advantage.group_update, D = 1)

which by the group-standard-deviation identity is lr * sigma^(2 - alpha) (s+ - s-) = lr *
sigma^(2 - alpha), as s+ - s- = (1 - p) - (-p) = 1: GRPO steps by sigma, Dr. GRPO by sigma^2,
a silent group by 0. Every step is >= 0, so p only rises.

Arms (all with the population std, ddof 0, as in the paper):
1. "grpo": preset grpo; "dr_grpo": preset dr_grpo, same lr.
2. "dapo": preset dapo; a silent group is redrawn up to `max_resample_rounds` times for that
   prompt in that step; every redraw costs G samples; one still silent after that gives no update.
3. "dr_grpo_lr_matched": Dr. GRPO with lr' = lr * mean_j E[sigma(p_j)] / mean_j E[sigma(p_j)^2],
   closed forms at the initial p (E[sigma^2] = p(1-p)(G-1)/G), so its expected mean initial step
   equals GRPO's. Closed form rather than the first realized step: it does not hang on one draw,
   and with thousands of prompts the two agree to well under 1%.
4. "hadw": preset hadw_grpo, GRPO with HA-DW's batch anchor (arXiv 2601.08521): A_i <- A_i Phi_i,
   Phi_i = s exp(-sgn(A_i)(p_hat_j - C_t^-)), p_hat_j the group's accuracy, C_t^- from
   core.difficulty_anchor (the preset's rule, Eqs. 8-11, and s = 1.5) on y_t = the step's mean
   reward over every sampled response. s > 1 also scales every step by s. Phi > 0
   keeps every term's sign, so p still only rises.
5. "hadw_prompt": the same with C_j = the prompt's running pass rate, an EMA C_j <- (1 - eta) C_j
   + eta p_hat_j (eta = anchor_rate, C_j = p_hat_j at the first step), taken before the step's
   update as the trainer takes its tracker's. Not the true p_j: no trainer has that oracle; not
   the group's own p_hat: that gives Phi = 1 (GRPO). The EMA is the simplest estimate a trainer
   keeps (its tracker, a decayed Beta count, weighs past groups alike), memory ~1/eta steps.
6. the engines' estimators, each its preset (analysis.arms.ENGINE_ARMS): "rloo", "opo",
   "grpo_passk", "batch_std", "gpg", "reinforce_pp_baseline", "reinforce_pp" (with the run's
   population std and eps). A response is one token, so OPO's length-weighted baseline is the
   group mean (OPO = Dr. GRPO here) and whitening over tokens is whitening over responses. The
   batch-level ones (batch std, GPG, the whitening) take their statistics over the step's J
   prompts. Every update stays >= 0: under REINFORCE++'s whitening A = (r - mu)/sd the group's
   sum is (k(1 - mu - p) + G mu p) / sd >= 0 for 0 <= mu, p <= 1, and its silent groups move
   too (an all-wrong group by mu p / sd: its wrong answers sit below the batch's mean reward).

Departures from the paper's script, on purpose:
- initial p are drawn with replacement from any pass-rate table; as in the paper, by default only
  0 < p < 1 is kept (`interior_only`) and p is clipped to [0.02, 0.98] (`p_clip`). With
  `interior_only=False` never/always-solved prompts enter too: they start almost silent (a group
  is informative with probability ~G p_clip) and barely move, which lowers the hardest quartile.
  A table with no interior pass rate at all (a weak real model) is used whole, with a warning.
- common random numbers: every arm gets fresh generators from the same seed, one stream for the
  first round of groups and one for DAPO's redraws, so at step 0 all arms see identical groups and
  the first-round stream never drifts out of step because DAPO drew more.
- DAPO redraws up to `max_resample_rounds` = 4 times (5 groups at most), as the paper states
  (docs/design-notes.md#reference-numbers); the paper's loop stopped at 4 groups in all, which
  is `max_resample_rounds=3`.
- the extreme-prompt mass is reported twice: at the first step (the paper's measure, on the
  initial population) and over the whole run.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch
from tqdm.auto import tqdm

from grpo_dial.analysis.arms import SIMULATION_ARMS, SIMULATION_DEFAULT, analysis_dial
from grpo_dial.core.advantage import group_update
from grpo_dial.core.bands import EXTREME_EDGES
from grpo_dial.core.checks import opt as _opt
from grpo_dial.core.dial import Dial
from grpo_dial.core.difficulty_anchor import START, anchor_before, anchor_update
from grpo_dial.core.theory import expected_signal, silent_rate

log = logging.getLogger("grpo_dial")

ARMS = SIMULATION_ARMS


@dataclass(frozen=True)
class SimulationConfig:
    """Settings of the controlled run; defaults are the paper's (6,000 prompts, G 8, 150 steps)."""

    n_prompts: int = _opt(6000, "J, prompts drawn (with replacement) from the pass-rate pool.")
    group_size: int = _opt(8, "G, responses per prompt per step.")
    steps: int = _opt(150, "Training steps; every prompt is updated once per step.")
    lr: float = _opt(0.5, "Learning rate on theta for every arm but dr_grpo_lr_matched.")
    seed: int = _opt(
        7, "Seeds the initial draw and, identically for every arm, the reward streams."
    )
    max_resample_rounds: int = _opt(
        4, "DAPO: redraws of a silent group per prompt per step; bounds the sample cost at (1+R)x."
    )
    arms: tuple[str, ...] = _opt(SIMULATION_DEFAULT, f"Arms to run, any of {ARMS}.")
    extreme_band: tuple[float, float] = _opt(
        EXTREME_EDGES, "A prompt is extreme when 0 < p < lo or hi < p < 1 (the paper's 0.1 / 0.9)."
    )
    p_clip: float = _opt(
        0.02,
        "Initial p clipped to [p_clip, 1 - p_clip] so theta = logit(p) is finite (paper 0.02).",
    )
    interior_only: bool = _opt(
        True, "Draw initial p only from 0 < p_hat < 1, as the paper; False keeps unanimous prompts."
    )
    eps: float = _opt(1e-8, "eps in (sigma + eps): tiny, so GRPO's step is sigma to ~1e-7.")
    progress: bool = _opt(False, "Show a tqdm bar over steps per arm.")

    def __post_init__(self) -> None:
        for name, lo in (
            ("n_prompts", 1),
            ("group_size", 2),
            ("steps", 1),
            ("max_resample_rounds", 0),
        ):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int | np.integer) or v < lo:
                raise ValueError(f"{name} must be an integer >= {lo}, got {v!r}")
        if (
            isinstance(self.lr, bool)
            or not isinstance(self.lr, int | float)
            or not (np.isfinite(self.lr) and self.lr >= 0)
        ):
            raise ValueError(f"lr must be a finite number >= 0, got {self.lr!r}")
        if (
            isinstance(self.seed, bool)
            or not isinstance(self.seed, int | np.integer)
            or self.seed < 0
        ):
            raise ValueError(f"seed must be a non-negative integer, got {self.seed!r}")
        arms = (self.arms,) if isinstance(self.arms, str) else tuple(self.arms)
        bad = [a for a in arms if a not in ARMS]
        if not arms or bad or len(set(arms)) != len(arms):
            raise ValueError(f"arms must be distinct names from {ARMS}, got {arms!r}")
        object.__setattr__(self, "arms", arms)
        band = tuple(float(x) for x in self.extreme_band)
        if len(band) != 2 or not 0 < band[0] <= band[1] < 1:
            raise ValueError(f"extreme_band must be (lo, hi) with 0 < lo <= hi < 1, got {band!r}")
        object.__setattr__(self, "extreme_band", band)
        if not 0 < self.p_clip < 0.5:
            raise ValueError(f"p_clip must be in (0, 0.5), got {self.p_clip!r}")
        if not 0 <= self.eps < 1:
            raise ValueError(f"eps must be in [0, 1), got {self.eps!r}")


def arm_dial(arm: str, config: SimulationConfig) -> Dial:
    """The arm's dial (analysis.arms) with the population std, config.eps and
    config.max_resample_rounds."""
    return analysis_dial(
        arm, ARMS, std_ddof=0, eps=config.eps, max_resample_rounds=config.max_resample_rounds
    )


def matched_lr(initial_p: np.ndarray, config: SimulationConfig) -> float:
    """lr * mean_j E[sigma(p_j)] / mean_j E[sigma(p_j)^2], with E[sigma^2] = p(1-p)(G-1)/G."""
    p = np.asarray(initial_p, dtype=float)  # (J,)
    g = config.group_size
    e_sigma = expected_signal(p, g, "grpo")  # (J,)
    e_sigma2 = expected_signal(p, g, "dr_grpo")  # (J,)
    return float(config.lr * np.mean(e_sigma) / np.mean(e_sigma2))


def _streams(seed: int) -> list[np.random.SeedSequence]:
    # [initial draw, first-round groups, DAPO redraws]: independent, and identical for every arm.
    return np.random.SeedSequence(seed).spawn(3)


def draw_initial_p(pass_rates: pd.DataFrame | np.ndarray, config: SimulationConfig) -> np.ndarray:
    """(J,) initial pass rates: config.n_prompts seeded draws with replacement from the pool
    (an array of pass rates, or a pass-rate table's 'p_hat' column)."""
    if isinstance(pass_rates, pd.DataFrame):
        if "p_hat" not in pass_rates.columns:
            raise ValueError("pass_rates table has no 'p_hat' column")
        pass_rates = pd.to_numeric(pass_rates["p_hat"], errors="coerce")
    pool = np.asarray(pass_rates, dtype=float)  # (n,)
    _check_p(pool, "pass rates")
    if config.interior_only:
        interior = pool[(pool > 0) & (pool < 1)]
        if interior.size == 0:  # e.g. a weak real model: every prompt always or never solved
            log.warning(
                "no pass rate strictly between 0 and 1 to draw from (interior_only): drawing from "
                "all %d pass rates instead, clipped to [p_clip, 1 - p_clip]",
                pool.size,
            )
        else:
            pool = interior
    rng = np.random.default_rng(_streams(config.seed)[0])
    return pool[rng.integers(0, pool.size, config.n_prompts)]  # (J,)


def _check_p(p: np.ndarray, what: str) -> None:
    if p.ndim != 1 or p.size == 0:
        raise ValueError(f"{what} must be a non-empty 1-D array, got shape {p.shape}")
    if not np.all(np.isfinite(p)) or np.any((p < 0) | (p > 1)):
        raise ValueError(f"{what} must hold finite pass rates in [0, 1]")


def _quartile(p: np.ndarray) -> np.ndarray:
    """(J,) 1..4, equal-sized by rank of p, 1 = hardest; ties broken by prompt index."""
    rank = np.empty(p.size, dtype=np.int64)
    rank[np.argsort(p, kind="stable")] = np.arange(p.size)
    return 1 + (4 * rank) // p.size


def _sigmoid(theta: np.ndarray) -> np.ndarray:
    return 0.5 * (1.0 + np.tanh(0.5 * theta))  # overflow-free logistic


def step_update(
    rewards: np.ndarray,
    p: np.ndarray,
    dial: Dial,
    group_ids: torch.Tensor | None = None,
    anchor: float | np.ndarray | None = None,
) -> np.ndarray:
    """(J,) update before the learning rate, (1/G) sum_i A_i (r_i - p_j), from rewards (J, G);
    anchor: HA-DW's C, a float or (J,) per prompt, for a dial with anchor != 'none'."""
    j, g = rewards.shape
    ids = torch.arange(j).repeat_interleave(g) if group_ids is None else group_ids  # (N,)
    r = torch.from_numpy(np.asarray(rewards, dtype=np.float64).reshape(-1))  # (N,)
    scores = torch.from_numpy((rewards - p[:, None]).reshape(-1, 1))  # (N, 1): d/dtheta log pi
    context = {}
    if dial.baseline == "length_weighted" or dial.whiten == "token":  # a response is one token
        context["lengths"] = torch.ones(j * g, dtype=torch.float64)
    if dial.anchor != "none" and anchor is not None:  # None: advantages says what is missing
        context["anchor"] = torch.as_tensor(anchor, dtype=torch.float64)  # () or (J,)
    return group_update(scores, r, ids, dial, **context)[:, 0].numpy()  # (J,)


@contextmanager
def _one_torch_thread() -> Iterator[None]:
    """Run torch single-threaded, then restore: its parallel CPU sort (inside torch.unique) is
    slower than one thread on these small (J*G,) tensors when the cores are shared."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def _run_arm(
    theta0: np.ndarray,
    quartile: np.ndarray,
    dial: Dial,
    lr: float,
    config: SimulationConfig,
    arm: str,
) -> tuple[list[dict], np.ndarray]:
    """Rows of steps_df for one arm and its final p; loops over steps and redraw rounds only."""
    j, g = theta0.size, config.group_size
    _, first, redraw = _streams(config.seed)
    first_rng, redraw_rng = np.random.default_rng(first), np.random.default_rng(redraw)
    ids = torch.arange(j).repeat_interleave(g)  # (N,), built once: group j = prompt j
    lo, hi = config.extreme_band
    hardest = quartile == 1  # (J,)
    theta = theta0.copy()  # (J,)
    state, running = START, None  # HA-DW: the batch anchor's state; the prompts' running p_hat
    rows, cumulative = [], 0
    for step in tqdm(range(config.steps), desc=arm, disable=not config.progress, leave=False):
        p = _sigmoid(theta)  # (J,)
        expected_silent = float(np.mean(silent_rate(p, g)))
        r = first_rng.random((j, g)) < p[:, None]  # (J, G)
        k = r.sum(axis=1)  # (J,)
        all_wrong, all_right = k == 0, k == g  # (J,)
        pending = all_wrong | all_right  # (J,)
        first_silent = float(pending.mean())
        samples, correct = j * g, int(k.sum())
        if dial.silent == "drop":
            for _ in range(dial.max_resample_rounds):
                idx = np.flatnonzero(pending)  # (S,)
                if idx.size == 0:
                    break
                fresh = redraw_rng.random((idx.size, g)) < p[idx, None]  # (S, G)
                r[idx] = fresh
                samples += idx.size * g
                kk = fresh.sum(axis=1)  # (S,)
                correct += int(kk.sum())
                pending[idx] = (kk == 0) | (kk == g)
        anchor = None
        if dial.anchor == "batch":
            y = correct / samples  # the step's batch accuracy over every sampled response
            form, m = dial.anchor_update, dial.anchor_window
            anchor = anchor_before(state, y, form=form, window=m)
            state = anchor_update(state, y, dial.anchor_rate, m, form=form)
        elif dial.anchor == "prompt":
            p_hat = r.mean(axis=1)  # (J,) the groups trained on
            anchor = p_hat if running is None else running  # (J,) before this step's update
            running = (1 - dial.anchor_rate) * anchor + dial.anchor_rate * p_hat
        update = lr * step_update(r, p, dial, ids, anchor)  # (J,)
        mass = np.abs(update)  # (J,)
        extreme = ((p > 0) & (p < lo)) | ((p > hi) & (p < 1))  # (J,)
        total = mass.sum()
        cumulative += samples
        rows.append(
            {
                "arm": arm,
                "step": step,
                "lr": lr,
                "group_size": g,
                "mean_p": float(p.mean()),
                "hardest_quartile_mean_p": float(p[hardest].mean()),
                "silent_fraction": first_silent,
                "all_correct_fraction": float(all_right.mean()),
                "all_wrong_fraction": float(all_wrong.mean()),
                "expected_silent_fraction": expected_silent,
                "silent_after_resample": float(pending.mean()),
                "samples": samples,
                "cumulative_samples": cumulative,
                "extreme_mass_share": float(mass[extreme].sum() / total) if total > 0 else np.nan,
                "mean_abs_update": float(mass.mean()),
            }
        )
        theta = theta + update
    return rows, _sigmoid(theta)


def simulate(initial_p: np.ndarray, config: SimulationConfig) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Run every arm from the same config.n_prompts initial p -> (steps_df, prompts_df).

    initial_p is the pool of pass rates (e.g. a pass-rate table's p_hat, any length); the J
    prompts are drawn from it with replacement (draw_initial_p), then clipped.

    steps_df, one row per (arm, step), measured on p before that step's update: arm, step, lr,
    group_size, mean_p, hardest_quartile_mean_p, silent_fraction (first round),
    all_correct_fraction, all_wrong_fraction, expected_silent_fraction (mean_j p^G + (1-p)^G),
    silent_after_resample (DAPO's unresolved groups; = silent_fraction for other arms), samples,
    cumulative_samples,
    extreme_mass_share (share of the step's sum |update| from extreme prompts; NaN if no update),
    mean_abs_update (mean_j |lr * update_j|).
    prompts_df: arm, prompt, initial_p (after clipping), final_p, initial_quartile (1 = hardest).
    """
    if not isinstance(config, SimulationConfig):
        raise ValueError(f"config must be a SimulationConfig, got {type(config).__name__}")
    p0 = np.clip(draw_initial_p(initial_p, config), config.p_clip, 1 - config.p_clip)  # (J,)
    theta0 = np.log(p0) - np.log1p(-p0)  # (J,)
    quartile = _quartile(p0)  # (J,)
    step_rows, prompt_frames = [], []
    for arm in config.arms:
        lr = matched_lr(p0, config) if arm == "dr_grpo_lr_matched" else config.lr
        with _one_torch_thread():
            rows, final_p = _run_arm(theta0, quartile, arm_dial(arm, config), lr, config, arm)
        step_rows.extend(rows)
        prompt_frames.append(
            pd.DataFrame(
                {
                    "arm": arm,
                    "prompt": np.arange(p0.size),
                    "initial_p": p0,
                    "final_p": final_p,
                    "initial_quartile": quartile,
                }
            )
        )
    return pd.DataFrame(step_rows), pd.concat(prompt_frames, ignore_index=True)

"""The aware-tail task with a tabular tail policy, trained through the trainer's own loss pieces.

The policy has one tail parameter per mode, theta_= and theta_~, continue probability
q = sigmoid(theta) after the core and after each tail token (a geometric tail, E[T] = e^theta).
Every step draws M groups of G responses exactly as the aware task does (data/tasks/aware.py:
mode, then correctness from the mode's accuracy), a tail from the policy, and a core of c forced
tokens; advantages come from core.advantage.advantages, the batch's kept rows from keep_mask (a
dropped silent group is not redrawn), token weights from advantage.make_token_weights with the
forced core's positions set to 0 (policy/rollout/forced.free_weights), exactly as train/step.py
builds them. On policy (ratio 1) the surrogate's gradient for theta_m is

    sum_i A_i sum_t w_it s_it 1{mode_i = m},  s = 1 - q on a continue token, -q on the stop token,

and SGD adds lr times it. So the simulation shares the trainer's advantage, normalizer and masking
code and replaces only the transformer by two logits: it is where the closed form
(core/length_drift.tail_drift) and the trainer's arithmetic are checked against each other, and
the blind task's zero drift is tested under every arm (tests/analysis/test_aware_sim.py).

`push_moments` draws many batches at one fixed theta and returns the gradient's mean and spread:
the closed form is its mean (an SGD step is lr x the mean), and under Adam, which divides each
coordinate by the root mean square of its recent gradients, the push's signal-to-noise ratio
mean / sd sets the step instead.
"""

from __future__ import annotations

import numpy as np
import torch

from grpo_dial.core import advantage
from grpo_dial.core.dial import Dial
from grpo_dial.policy.rollout.forced import free_weights


def _batch_gradient(
    dial: Dial,
    theta: np.ndarray,
    rng: np.random.Generator,
    gid: torch.Tensor,
    weigh,
    compute_accuracy: float,
    estimate_accuracy: float,
    estimate_rate: float,
    core: int,
    max_tail: int,
) -> np.ndarray:
    """(2,) one batch's surrogate gradient for [theta_=, theta_~] (module docstring), drawn as
    the task draws a step: modes, verdicts, tails from the policy, the trainer's weights."""
    n = len(gid)
    est = rng.random(n) < estimate_rate  # (N,)
    acc = np.where(est, estimate_accuracy, compute_accuracy)
    reward = torch.tensor((rng.random(n) < acc).astype(float))  # (N,)
    q = 1 / (1 + np.exp(-theta[est.astype(int)]))  # (N,)
    tail = np.minimum(rng.geometric(1 - q) - 1, max_tail)  # (N,)
    length = core + tail + 1  # forced core, tail tokens, the stop token
    width = int(length.max())
    pos = np.arange(width)[None, :]  # (1, T)
    mask = torch.tensor(pos < length[:, None], dtype=torch.long)  # (N, T)
    adv = advantage.advantages(reward, gid, dial)  # (N,)
    keep = advantage.keep_mask(reward, gid, dial)  # (N,)
    rows = keep.nonzero().squeeze(1)
    sub_gid = torch.unique(gid[rows], return_inverse=True)[1]
    lam = torch.tensor(float(dial.lambda_value))
    w = free_weights(weigh(mask[rows], sub_gid, lam), torch.full((len(rows),), core))  # (B, T)
    r = rows.numpy()
    # score of each position: continue tokens (core .. core + T - 1), then the stop token
    cont = (pos >= core) & (pos < core + tail[r, None])
    stop = pos == core + tail[r, None]
    s = np.where(cont, 1 - q[r, None], 0.0) - np.where(stop, q[r, None], 0.0)  # (B, T)
    per_row = adv[rows].numpy() * (w.numpy() * s).sum(1)  # (B,)
    return np.array([per_row[est[r].astype(int) == m].sum() for m in (0, 1)])


def simulate_tail(
    dial: Dial,
    *,
    compute_accuracy: float,
    estimate_accuracy: float,
    estimate_rate: float = 0.5,
    core: int = 5,
    theta0: float = float(np.log(3.0)),
    steps: int = 100,
    groups: int = 16,
    group_size: int = 8,
    lr: float = 1.0,
    seed: int = 0,
    max_tail: int = 200,
) -> np.ndarray:
    """(steps + 1, 2) theta_= and theta_~ after each SGD step (row 0: the start)."""
    rng = np.random.default_rng(seed)
    theta = np.array([theta0, theta0], dtype=float)  # [compute, estimate]
    out = [theta.copy()]
    gid = torch.arange(groups).repeat_interleave(group_size)  # (N,)
    weigh = advantage.make_token_weights(dial)
    for _ in range(steps):
        theta += lr * _batch_gradient(
            dial, theta, rng, gid, weigh, compute_accuracy, estimate_accuracy, estimate_rate,
            core, max_tail,
        )  # fmt: skip
        out.append(theta.copy())
    return np.array(out)


def push_moments(
    dial: Dial,
    *,
    compute_accuracy: float,
    estimate_accuracy: float,
    estimate_rate: float = 0.5,
    core: int = 5,
    theta: tuple[float, float] = (float(np.log(3.0)), float(np.log(3.0))),
    groups: int = 16,
    group_size: int = 8,
    batches: int = 2000,
    seed: int = 0,
    max_tail: int = 200,
) -> dict[str, float]:
    """Mean and standard deviation over `batches` independent batches, at a fixed
    theta = (theta_=, theta_~), of one batch's gradient for theta_~ (wrong), theta_= (correct)
    and their difference (contrast), and each one's signal-to-noise ratio mean / sd: Adam's
    per-coordinate step is about lr x snr / sqrt(1 + snr^2), whatever the gradient's scale."""
    rng = np.random.default_rng(seed)
    th = np.asarray(theta, dtype=float)
    gid = torch.arange(groups).repeat_interleave(group_size)  # (N,)
    weigh = advantage.make_token_weights(dial)
    g = np.array(
        [
            _batch_gradient(
                dial,
                th,
                rng,
                gid,
                weigh,
                compute_accuracy,
                estimate_accuracy,
                estimate_rate,
                core,
                max_tail,
            )  # fmt: skip
            for _ in range(batches)
        ]
    )  # (batches, 2): [compute, estimate]
    out = {}
    for name, x in (("wrong", g[:, 1]), ("correct", g[:, 0]), ("contrast", g[:, 1] - g[:, 0])):
        mean, sd = float(x.mean()), float(x.std(ddof=1))
        out |= {f"mean_{name}": mean, f"sd_{name}": sd, f"snr_{name}": mean / sd if sd else 0.0}
    return out

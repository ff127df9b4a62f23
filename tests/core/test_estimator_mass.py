"""Every engine's estimator's expected gradient mass per pass rate (core.theory.estimator_mass)
against a Monte Carlo through the dial's own advantages: batches of Bernoulli prompts, the
group update with the Bernoulli-logit score r - p (advantage.group_update), averaged per p."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from grpo_dial.core.advantage import group_update
from grpo_dial.core.dial import dial_from_config
from grpo_dial.core.estimator_mass import MASS_ESTIMATORS, SAME_OPERATION, estimator_mass

GRID = np.array([0.05, 0.15, 0.3, 0.5, 0.7, 0.85, 0.95])
COPIES, G, REPS = 8, 8, 300
DIALS = {  # the dial setting of each curve (population std, eps 0 where the closed form has it)
    "grpo": {"eps": 0.0},
    "dr_grpo": {"preset": "dr_grpo"},
    "rloo": {"preset": "rloo"},
    "opo": {"preset": "opo"},
    "grpo_passk": {"preset": "grpo_passk", "std_ddof": 0, "eps": 0.0},
    "batch_std": {"preset": "batch_std", "std_ddof": 0, "eps": 0.0},
    "gpg": {"preset": "gpg"},
    "gpg_paper": {"preset": "gpg", "gpg_scale": "informative"},
    "reinforce_pp_baseline": {"preset": "reinforce_pp_baseline", "std_ddof": 0},
    "reinforce_pp": {"preset": "reinforce_pp", "std_ddof": 0},
}
BATCH_CONSTANT = {"batch_std", "gpg", "gpg_paper", "reinforce_pp_baseline", "reinforce_pp"}


def monte_carlo(name: str, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """(mean, standard error) per GRID value of (1/G) sum_i A_i (r_i - p) under the dial."""
    dial = dial_from_config(DIALS[name])
    rng = np.random.default_rng(seed)
    p = np.repeat(GRID, COPIES)  # (J,) the batch's prompts
    ids = torch.arange(len(p)).repeat_interleave(G)  # (J G,)
    pr = torch.from_numpy(np.repeat(p, G))  # (J G,)
    out = np.zeros((REPS, len(p)))
    for rep in range(REPS):
        r = torch.from_numpy((rng.random(len(pr)) < pr.numpy()).astype(float))
        lengths = torch.from_numpy(rng.integers(1, 21, len(pr)))  # independent of correctness
        context = {"lengths": lengths} if name in ("opo", "reinforce_pp_baseline",
                                                   "reinforce_pp") else {}  # fmt: skip
        out[rep] = group_update((r - pr)[:, None], r, ids, dial, **context)[:, 0].numpy()
    per_p = out.reshape(REPS, len(GRID), COPIES).reshape(REPS, len(GRID), -1)
    samples = per_p.transpose(1, 0, 2).reshape(len(GRID), -1)  # (P, REPS x COPIES)
    return samples.mean(1), samples.std(1, ddof=1) / np.sqrt(samples.shape[1])


@pytest.mark.parametrize("name", MASS_ESTIMATORS)
def test_estimator_mass_matches_monte_carlo(name):
    mean, se = monte_carlo(name)
    exact = estimator_mass(GRID, G, name, batch_p=GRID)
    slack = 0.03 * np.abs(exact) if name in BATCH_CONSTANT else 0.0  # finite-batch constants
    # + 1e-5: pass@k at p >= 0.85 needs k = 1, rarer than once in these draws
    assert (np.abs(mean - exact) <= 4.5 * se + slack + 1e-5).all(), (mean, exact, se)


def test_mass_hand_numbers_and_the_same_operation_table():
    p = np.array([0.25])
    assert estimator_mass(p, 4, "dr_grpo") == pytest.approx(0.25 * 0.75 * 0.75)
    assert estimator_mass(p, 4, "rloo") == pytest.approx(0.25 * 0.75)
    # pass@k, G = 4: k = 1 with probability 4 (1/4)(3/4)^3; (1/4) x (1 - 1/4) / sigma_1
    sigma1 = np.sqrt(3) / 4
    assert estimator_mass(p, 4, "grpo_passk") == pytest.approx(0.25 * 0.75**4 / sigma1)
    # a batch at p = 0.25 only: sigma_B = sqrt(3/16); GPG (verl) / pbar
    assert estimator_mass(p, 4, "batch_std") == pytest.approx(0.140625 / np.sqrt(3 / 16))
    assert estimator_mass(p, 4, "gpg") == pytest.approx(0.140625 / 0.25)
    assert set(SAME_OPERATION) == set(MASS_ESTIMATORS)
    with pytest.raises(ValueError, match="estimator='ppo' is not valid"):
        estimator_mass(p, 4, "ppo")

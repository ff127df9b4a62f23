"""core.estimator_mass away from the defaults, by hand: the sample std (ddof 1), a fractional
std_power, eps in pass@k, and REINFORCE++ without a baseline at awareness below 1."""

import numpy as np
import pytest

from grpo_dial.core.estimator_mass import estimator_mass, whitened_tail_drift

# G = 4, p = 0.3: P(k) = 0.2401, 0.4116, 0.2646, 0.0756, 0.0081 for k = 0..4;
# sigma_k^2 = k(4 - k)/16 = 3/16 (k = 1, 3) and 1/4 (k = 2)
PK = {1: 0.4116, 2: 0.2646, 3: 0.0756}


def test_grpo_mass_under_the_sample_std():
    # ddof 1: sd_k^2 = k(4-k)/(4 x 3) = 1/4 and 1/3, so sigma^2 / sd = 0.375 and 0.433013
    want = (PK[1] + PK[3]) * 0.375 + PK[2] * 0.25 / np.sqrt(1 / 3)  # 0.297275
    assert estimator_mass(0.3, 4, "grpo", ddof=1) == pytest.approx(want, rel=1e-6)
    assert want == pytest.approx(0.297275, abs=1e-6)
    # ddof 0: sigma^2 / sigma = sigma = 0.433013 and 0.5
    assert estimator_mass(0.3, 4, "grpo") == pytest.approx(0.343264, abs=1e-6)


def test_grpo_mass_at_a_fractional_std_power():
    # std_power 1/2: sigma^2 / sigma^(1/2) = sigma^(3/2) = (3/16)^(3/4) = 0.284947, 1/2^(3/2)
    want = (PK[1] + PK[3]) * (3 / 16) ** 0.75 + PK[2] * 0.5**1.5
    assert want == pytest.approx(0.232372, abs=1e-6)
    assert estimator_mass(0.3, 4, "grpo", std_power=0.5) == pytest.approx(want, rel=1e-6)


def test_pass_at_k_mass_adds_eps_to_its_std():
    # p (1-p)^4 = 0.3 x 0.2401 = 0.07203 over sd_1 = sqrt(3/4 / 3) = 1/2 (ddof 1), + eps 0.1
    assert estimator_mass(0.3, 4, "grpo_passk", ddof=1) == pytest.approx(0.14406)
    assert estimator_mass(0.3, 4, "grpo_passk", ddof=1, eps=0.1) == pytest.approx(0.12005)
    # std_power 1/2: 0.07203 / sqrt(0.6)
    got = estimator_mass(0.3, 4, "grpo_passk", ddof=1, eps=0.1, std_power=0.5)
    assert got == pytest.approx(0.07203 / np.sqrt(0.6))


def test_reinforce_pp_without_baseline_is_blind_at_awareness_zero():
    """Baseline 'none', sequence normalizer, awareness 0: both tails serve right and wrong
    answers alike (pi = 1/2), so E[T | wrong] = E[T | correct], mu = p and each tail's share is
    1/2: u_w = (p/2 h_w - mu/2 h_w)/sd = 0 and so u_c. At awareness 1/2 they move apart
    (tests/core/test_whitened_drift.py checks the value against a Monte Carlo)."""
    blind = whitened_tail_drift(0.4, 0.8, 0.6, 5, 8, awareness=0.0, baseline="none")
    assert abs(float(blind.wrong)) < 1e-15 and abs(float(blind.correct)) < 1e-15
    half = whitened_tail_drift(0.4, 0.8, 0.6, 5, 8, awareness=0.5, baseline="none")
    assert float(half.wrong) > 1e-3 and float(half.correct) < -1e-3


def test_pass_at_k_sample_std_at_two_responses():
    # G = 2, ddof 1: sd_1 = sqrt(1/2 / 1) = 0.707107 (the sample std of 1, 0); p (1-p)^2 = 0.147
    got = estimator_mass(0.3, 2, "grpo_passk", ddof=1)
    assert got == pytest.approx(0.147 / np.sqrt(0.5), rel=1e-9)


def test_rloo_with_one_response_moves_nothing():
    got = estimator_mass([0.3, 0.5], 1, "rloo")
    assert got.shape == (2,) and got.dtype == float and (got == 0).all()


def test_reinforce_pp_baseline_adds_1e_8_to_a_nearly_silent_batch_variance():
    # batch at p = 1e-8, G = 4: v = 1e-8 (1 - 1e-8)(3/4) = 0.75e-8; dr(0.5) = 0.1875
    got = estimator_mass(0.5, 4, "reinforce_pp_baseline", batch_p=[1e-8])
    assert got == pytest.approx(0.1875 / np.sqrt(1.75e-8), rel=1e-6)


def test_a_bad_batch_p_is_named():
    with pytest.raises(ValueError) as err:
        estimator_mass(0.5, 4, "gpg", batch_p=[1.5])
    assert str(err.value) == "batch_p must lie in [0, 1] (no NaN)"
    with pytest.raises(ValueError) as err:
        estimator_mass(0.5, 4, "gpg", batch_p=["x"])
    assert str(err.value) == "batch_p must be numeric, got ['x']"


def test_grpo_sample_std_at_two_responses():
    # G = 2, ddof 1: k = 1 w.p. 2 x 0.3 x 0.7 = 0.42, sigma^2 = 1/4 over sd = sqrt(1/2)
    got = estimator_mass(0.3, 2, "grpo", ddof=1)
    assert got == pytest.approx(0.42 * 0.25 / np.sqrt(0.5), rel=1e-9)


def test_one_response_or_a_silent_batch_moves_nothing_in_p_shape():
    p = [0.3, 0.5]
    for name in ("grpo_passk", "rloo"):
        got = estimator_mass(p, 1, name, ddof=1)
        assert got.shape == (2,) and got.dtype == float and (got == 0).all()
    for name in ("gpg", "gpg_paper"):  # pbar = 0 / no informative group
        got = estimator_mass([0.0, 0.0], 4, name)
        assert got.shape == (2,) and got.dtype == float and (got == 0).all()


def test_batch_std_mass_at_a_fractional_std_power():
    # p = 1/2, G = 4: dr = 0.1875, sigma_B = 1/2: 0.1875 / sqrt(1/2) = 0.265165
    got = estimator_mass(0.5, 4, "batch_std", std_power=0.5)
    assert got == pytest.approx(0.265165, abs=1e-6)

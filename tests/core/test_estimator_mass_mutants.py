"""core.estimator_mass: eps, G = 1 and 2 and a separate batch, by hand."""

import numpy as np
import pytest

from grpo_dial.core.estimator_mass import estimator_mass


def test_rloo_at_two_responses_is_p_one_minus_p():
    np.testing.assert_allclose(estimator_mass([0.3, 0.5], 2, "rloo"), [0.21, 0.25])


def test_one_response_is_accepted_and_moves_nothing():
    np.testing.assert_allclose(estimator_mass([0.3], 1, "dr_grpo"), [0.0])


def test_eps_adds_to_the_std():
    # grpo, G = 2: k = 1 w.p. 1/2 at p = 1/2, sigma^2 = 1/4, sd = 1/2 -> (1/2)(1/4)/(1/2 + 0.1)
    assert estimator_mass(0.5, 2, "grpo", eps=0.1) == pytest.approx(0.5 * 0.25 / 0.6)
    # batch_std: dr = p(1-p)(1-1/G) = 0.1875 at p = 1/2, G = 4; sigma_B = 1/2
    assert estimator_mass(0.5, 4, "batch_std", eps=0.1) == pytest.approx(0.1875 / 0.6)


def test_the_batch_terms_read_batch_p():
    # gpg: dr / pbar with pbar the batch's mean 0.25, not this p's 0.5
    assert estimator_mass(0.5, 4, "gpg", batch_p=[0.25]) == pytest.approx(0.1875 / 0.25)

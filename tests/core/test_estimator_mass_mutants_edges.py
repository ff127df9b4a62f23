"""core.estimator_mass at the edges: silent batches give 0, not NaN, and the refusals' lines
(a held-out mutation sample)."""

import numpy as np
import pytest

from grpo_dial.core.estimator_mass import estimator_mass


@pytest.mark.parametrize("estimator", ["gpg", "gpg_paper", "reinforce_pp"])
def test_an_all_silent_batch_moves_nothing(estimator):
    with np.errstate(all="raise"):
        got = estimator_mass([0.0, 0.0], 4, estimator)
    np.testing.assert_array_equal(got, [0.0, 0.0])


def test_refusals():
    with pytest.raises(ValueError, match=r"^p must lie in \[0, 1\] \(no NaN\)$"):
        estimator_mass(1.5, 4, "dr_grpo")
    with pytest.raises(ValueError, match="^G must be an integer >= 1, got 0$"):
        estimator_mass(0.5, 0, "dr_grpo")
    with pytest.raises(ValueError, match="^batch_p must hold at least one pass rate$"):
        estimator_mass(0.5, 4, "gpg", batch_p=[])

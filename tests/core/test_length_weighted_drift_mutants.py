"""OPO's length drift (core.length_weighted_drift through tail_drift) under the sample std and a
fractional std_power, by the exact scaling: with eps 0 every interior k's std is multiplied by
sqrt(G/(G - ddof)), so the drift by ((G - ddof)/G)^(std_power/2)."""

import numpy as np
import pytest

from grpo_dial.core.length_drift import tail_drift

ARGS = (0.4, 0.8, 0.6, 5, 4)  # p, q_wrong, q_correct, core length, G = 4
KW = {"length_norm": "constant", "awareness": 0.7, "baseline": "length_weighted",
      "max_length": 40.0}  # fmt: skip


@pytest.mark.parametrize(
    ("G", "std_power", "factor"),
    [(4, 1.0, 0.866025), (4, 0.5, 0.930605), (2, 1.0, 0.707107), (2, 0.5, 0.840896)],
)
def test_opo_drift_under_ddof_one_is_the_population_ones_times_a_constant(G, std_power, factor):
    # G = 4: sqrt(3/4) = 0.866025 (13.4% less) at std_power 1, (3/4)^(1/4) = 0.930605 at 1/2;
    # G = 2: sqrt(1/2) = 0.707107 and (1/2)^(1/4) = 0.840896
    args = (*ARGS[:4], G)
    pop = tail_drift(*args, std_power=std_power, **KW)
    sample = tail_drift(*args, std_power=std_power, ddof=1, **KW)
    assert abs(float(pop.wrong)) > 1e-4 and abs(float(pop.correct)) > 1e-4
    np.testing.assert_allclose(
        [sample.wrong, sample.correct], factor * np.array([pop.wrong, pop.correct]), rtol=1e-5
    )
    # ddof 0 and std_power 0: the std does not enter; eps then moves nothing either
    flat = tail_drift(*args, std_power=0.0, ddof=1, eps=0.3, **KW)
    flat0 = tail_drift(*args, std_power=0.0, **KW)
    np.testing.assert_allclose([flat.wrong, flat.correct], [flat0.wrong, flat0.correct])


def test_opo_drift_adds_eps_to_the_std():
    """At G = 2 the only interior k is 1, sigma = 1/2: eps 0.5 halves the drift at std_power 1
    (1/2 -> 1) and divides it by sqrt(2) at std_power 1/2."""
    args = (0.4, 0.8, 0.6, 5, 2)
    for power, factor in ((1.0, 0.5), (0.5, 2**-0.5)):
        base = tail_drift(*args, std_power=power, **KW)
        with_eps = tail_drift(*args, std_power=power, eps=0.5, **KW)
        np.testing.assert_allclose(
            [with_eps.wrong, with_eps.correct], factor * np.array([base.wrong, base.correct]),
            rtol=1e-10,
        )

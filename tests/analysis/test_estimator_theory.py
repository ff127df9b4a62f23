"""The theory stage's estimator tables (analysis.theory.estimators): each engine estimator's
gradient mass per pass rate against hand numbers, and the same-operation identities checked
numerically through the dial's advantages, with the constants each formula predicts."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from grpo_dial.analysis.summary.sections import estimator_theory
from grpo_dial.analysis.theory.estimators import (
    IDENTITY_COLUMNS,
    MASS_COLUMNS,
    estimator_identity_table,
    estimator_mass_table,
)
from grpo_dial.core.estimator_mass import EXACT_RESCALINGS, MASS_ESTIMATORS


@pytest.fixture(scope="module")
def identity() -> pd.DataFrame:
    return estimator_identity_table(n_batches=60, seed=3).set_index("estimator")


def test_mass_table_hand_numbers():
    t = estimator_mass_table([0.1, 0.5], [2, 8]).set_index(["estimator", "G", "p"])
    assert list(t.reset_index().columns) == list(MASS_COLUMNS)
    assert len(t) == len(MASS_ESTIMATORS) * 2 * 2
    # GRPO at p = 0.5, G = 8, eps 0: E[sigma_k] = sum_k C(8,k)/256 sqrt(k(8-k))/8
    grpo = (16 * np.sqrt(7) + 56 * np.sqrt(12) + 112 * np.sqrt(15) + 280) / 2048
    assert t.loc[("grpo", 8, 0.5), "mass"] == pytest.approx(grpo, rel=1e-12)
    assert grpo == pytest.approx(0.463914, abs=1e-6)
    # G = 2: only k = 1 moves (prob 2 p (1-p)), sigma = 1/2: GRPO 2p(1-p)/4 / (1/2) = p(1-p)
    assert t.loc[("grpo", 2, 0.1), "mass"] == pytest.approx(0.09)
    assert t.loc[("dr_grpo", 8, 0.5), "mass"] == pytest.approx(0.25 * 7 / 8)
    assert t.loc[("dr_grpo", 2, 0.1), "mass"] == pytest.approx(0.09 / 2)
    # RLOO = G/(G-1) x Dr. GRPO at every p: the ratio is one number
    rloo = t.xs("rloo", level="estimator")["ratio_to_dr_grpo"]
    np.testing.assert_allclose(rloo.xs(8, level="G"), 8 / 7)
    np.testing.assert_allclose(rloo.xs(2, level="G"), 2.0)
    # the batch is the grid {0.1, 0.5}: pbar 0.3, batch std sqrt(0.21), GPG 1/pbar
    assert t.loc[("batch_std", 8, 0.1), "ratio_to_dr_grpo"] == pytest.approx(1 / np.sqrt(0.21))
    assert t.loc[("gpg", 8, 0.5), "ratio_to_dr_grpo"] == pytest.approx(1 / 0.3)
    assert t.loc[("grpo", 8, 0.5), "share_of_peak"] == 1.0
    assert t.loc[("grpo", 8, 0.1), "share_of_peak"] == pytest.approx(
        t.loc[("grpo", 8, 0.1), "mass"] / grpo
    )


def test_mass_table_bad_input_names_it():
    with pytest.raises(ValueError, match="ps must be a non-empty list of pass rates"):
        estimator_mass_table([0.0, 0.5], [8])
    with pytest.raises(ValueError, match="group sizes must be >= 2, got 1"):
        estimator_mass_table([0.5], [1])
    with pytest.raises(ValueError, match="n_batches must be an integer >= 1, got 0"):
        estimator_identity_table(n_batches=0)


def test_identities_hold_exactly_where_predicted(identity):
    assert list(identity.reset_index().columns) == list(IDENTITY_COLUMNS)
    assert set(identity.index[identity["same_operation"]]) == set(EXACT_RESCALINGS)
    assert (identity["same_operation"] == identity["predicted_same"]).all()
    same = identity[identity["predicted_same"]]
    assert (same["max_relative_residual"] < 1e-12).all()
    # each fitted constant is the one its formula predicts
    assert (same["max_constant_error"] < 1e-12).all()
    # RLOO's constant is G/(G-1) with G in 2..16: within [16/15, 2]
    assert identity.loc["rloo", "constant_min"] >= 16 / 15 - 1e-12
    assert identity.loc["rloo", "constant_max"] <= 2 + 1e-12
    assert identity.loc["dr_grpo", "constant_min"] == identity.loc["dr_grpo", "constant_max"] == 1
    # the others are not rescalings: OPO's baseline, token whitening and GRPO's per-group std
    # move the residual far from rounding
    for name in ("opo", "reinforce_pp_baseline", "grpo", "grpo_passk", "reinforce_pp"):
        assert identity.loc[name, "max_relative_residual"] > 0.05, name
        assert np.isnan(identity.loc[name, "max_constant_error"])


def test_identity_table_is_seeded():
    a = estimator_identity_table(n_batches=5, seed=1)
    b = estimator_identity_table(n_batches=5, seed=1)
    pd.testing.assert_frame_equal(a, b)


def test_summary_section_reads_both_tables(identity):
    mass = estimator_mass_table(np.linspace(0.05, 0.95, 19), [4, 8])
    lines = estimator_theory({
        "theory/estimator_mass.csv": mass,
        "theory/estimator_identity.csv": identity.reset_index(),
    })  # fmt: skip
    text = "\n".join(lines)
    assert "at G = 8" in text
    assert "| Dr. GRPO | 0.0416 | 0.0788 | 0.1837 | 0.2187 | 1.000-1.000 | yes (0) |" in text
    assert "| RLOO | 0.0475 | 0.0900 | 0.2100 | 0.2500 | 1.143-1.143 | yes" in text
    assert "every identity as predicted." in text
    assert estimator_theory({}) == []

"""The group-standard-deviation identity, checked through advantage.group_update."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from grpo_dial.analysis.theory.identity import identity_curve, identity_residuals


def test_identity_curve_equals_sigma_at_every_k_and_baseline():
    df = identity_curve()
    assert list(df.columns) == [
        "G", "k", "baseline", "sigma_closed_form", "mc_update", "mc_se", "n_groups_at_k"
    ]  # fmt: skip
    assert sorted(df["baseline"].unique()) == [0.2, 0.5, 0.8]
    k = df["k"].to_numpy()
    np.testing.assert_allclose(df["sigma_closed_form"], np.sqrt(k * (8 - k)) / 8, atol=1e-15)
    drawn = df[df["n_groups_at_k"] > 0]
    np.testing.assert_allclose(drawn["mc_update"], drawn["sigma_closed_form"], atol=1e-6)
    assert (drawn["mc_se"] < 1e-6).all()  # exact per group, not only on average
    # hand values: k = 4 of 8 gives 1/2, silent groups give 0
    assert drawn.loc[drawn["k"] == 4, "mc_update"].to_numpy() == pytest.approx(0.5)
    assert (drawn.loc[drawn["k"].isin([0, 8]), "mc_update"] == 0).all()
    for _, d in df.groupby("baseline"):
        assert d["n_groups_at_k"].sum() == 20000
        assert (d["n_groups_at_k"] > 0).sum() >= 8  # at most one unreachable unanimous k
    missing = df[df["n_groups_at_k"] == 0]
    assert missing["mc_update"].isna().all()


def test_identity_curve_singleton_groups_are_silent():
    df = identity_curve(group_size=1, baselines=(0.3,), n_groups=500)
    assert list(df["k"]) == [0, 1]
    np.testing.assert_array_equal(df["mc_update"], [0.0, 0.0])
    np.testing.assert_array_equal(df["sigma_closed_form"], [0.0, 0.0])


def test_identity_curve_is_seeded():
    a = identity_curve(n_groups=300, seed=3)
    b = identity_curve(n_groups=300, seed=3)
    assert a.equals(b)


def test_identity_residuals_below_tolerance():
    df = identity_residuals()
    assert list(df.columns) == ["recipe", "G", "k", "dim", "max_abs_residual", "relative_residual"]
    # every recipe x G x k (silent k = 0, G included) x dim
    assert len(df) == 3 * sum(g + 1 for g in (2, 4, 8, 16)) * 2
    assert set(df["recipe"]) == {"grpo", "dr_grpo", "sample_std"}
    assert (df["max_abs_residual"] < 1e-5).all()
    assert (df["relative_residual"] < 1e-5).all()
    silent = df[(df["k"] == 0) | (df["k"] == df["G"])]
    assert (silent["max_abs_residual"] == 0).all()


@settings(max_examples=50, deadline=None)
@given(g=st.integers(2, 12), dim=st.integers(1, 6), seed=st.integers(0, 2**31 - 1))
def test_identity_residuals_property(g, dim, seed):
    df = identity_residuals(dims=(dim,), group_sizes=(g,), n_trials=5, seed=seed)
    assert (df["max_abs_residual"] < 1e-9).all()


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda: identity_curve(baselines=(0.0,)), "baselines"),
        (lambda: identity_curve(n_groups=0), "n_groups"),
        (lambda: identity_residuals(group_sizes=(1,)), "group_sizes"),
        (lambda: identity_residuals(dims=()), "dims"),
    ],
)
def test_bad_inputs(call, match):
    with pytest.raises(ValueError, match=match):
        call()

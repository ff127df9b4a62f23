"""Tests for grpo_dial.analysis.theory.tables: shape, columns and values checked against
independent sums.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from grpo_dial.analysis.theory import tables as TT

# docs/design-notes.md#reference-numbers, as (p, fidelity) -> (exact G, closed form rounded to
# nearest)
PAPER = {
    (0.50, 0.90): (7, 5), (0.50, 0.95): (11, 10), (0.50, 0.99): (51, 50),
    (0.30, 0.90): (9, 6), (0.30, 0.95): (14, 12), (0.30, 0.99): (61, 60),
    (0.10, 0.90): (22, 14), (0.10, 0.95): (36, 28), (0.10, 0.99): (144, 139),
    (0.05, 0.90): (42, 26), (0.05, 0.95): (69, 53), (0.05, 0.99): (273, 263),
}  # fmt: skip


def slow_expected_sigma(p: float, G: int) -> float:
    return (
        sum(
            math.comb(G, k) * p**k * (1 - p) ** (G - k) * math.sqrt(k * (G - k))
            for k in range(G + 1)
        )
        / G
    )


def test_group_size_table_reproduces_paper():
    df = TT.group_size_table()
    assert list(df.columns) == [
        "p", "fidelity", "eps", "g_exact", "g_closed_form",
        "g_closed_form_nearest", "g_closed_form_ceil",
    ]  # fmt: skip
    assert len(df) == 12
    got = {(r.p, r.fidelity): (r.g_exact, r.g_closed_form_nearest) for r in df.itertuples()}
    assert got == PAPER
    np.testing.assert_allclose(df.eps, 1 - df.fidelity, atol=1e-12)
    np.testing.assert_allclose(df.g_closed_form, 1 / (8 * df.eps * df.p * (1 - df.p)))
    row = df[(df.p == 0.05) & (df.fidelity == 0.90)].iloc[0]
    assert (row.g_closed_form_nearest, row.g_closed_form_ceil) == (26, 27)
    # float noise must not push an exact integer G* up: 1/(8 * 0.1 * 0.25) is 5
    assert df[(df.p == 0.5) & (df.fidelity == 0.9)].g_closed_form_ceil.item() == 5
    assert df.g_exact.dtype == np.int64 and df.g_closed_form_nearest.dtype == np.int64


def test_group_size_table_is_symmetric():
    ps = (0.5, 0.3, 0.1, 0.05)
    a = TT.group_size_table(ps)
    b = TT.group_size_table(tuple(1 - p for p in ps))
    cols = ["g_exact", "g_closed_form_nearest", "g_closed_form_ceil"]
    pd.testing.assert_frame_equal(a[cols], b[cols])


def test_group_size_table_unanimous_prompt_sentinel():
    df = TT.group_size_table(ps=(0.0, 1.0), fidelities=(0.9,))
    assert (df.g_exact == -1).all() and (df.g_closed_form_nearest == -1).all()
    assert np.isinf(df.g_closed_form).all()


def test_fidelity_grid_values_and_layout():
    ps, Gs = [0.0, 0.05, 0.5, 0.9, 1.0], [1, 2, 8, 64]
    df = TT.fidelity_grid(ps, Gs)
    assert list(df.columns) == [
        "p", "G", "expected_sigma", "sqrt_p_1mp", "fidelity", "fidelity_expansion",
        "silent_rate", "all_correct_rate", "all_wrong_rate",
    ]  # fmt: skip
    assert len(df) == len(ps) * len(Gs)
    assert df.G.dtype == np.int64
    assert list(df.p) == [p for p in ps for _ in Gs] and list(df.G) == Gs * len(ps)
    want = [slow_expected_sigma(p, G) for p in ps for G in Gs]
    np.testing.assert_allclose(df.expected_sigma, want, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(df.all_correct_rate, df.p**df.G)
    np.testing.assert_allclose(df.all_wrong_rate, (1 - df.p) ** df.G)
    np.testing.assert_allclose(df.silent_rate, df.all_correct_rate + df.all_wrong_rate)
    inner = (df.p > 0) & (df.p < 1)
    np.testing.assert_allclose(
        df.fidelity[inner], (df.expected_sigma / df.sqrt_p_1mp)[inner], rtol=1e-12
    )
    assert (df.fidelity[~inner] == 0).all() and np.isneginf(df.fidelity_expansion[~inner]).all()
    singleton = df[df.G == 1]  # one response: always silent, no gain
    assert (singleton.silent_rate == 1).all() and (singleton.expected_sigma == 0).all()
    assert df.query("p == 0.5 and G == 8").fidelity.round(2).item() == 0.93
    assert df.query("p == 0.05 and G == 8").fidelity.round(2).item() == 0.54


def test_fidelity_grid_rejects_bad_group_size():
    with pytest.raises(ValueError, match="G must be integers >= 1"):
        TT.fidelity_grid([0.5], [0, 4])
    with pytest.raises(ValueError, match="p must lie"):
        TT.fidelity_grid([1.5], [4])


def test_difficulty_weight_curve():
    ps = [0.0, 0.1, 0.25, 0.5, 1.0]
    df = TT.difficulty_weight_curve(ps)
    assert list(df.columns) == [
        "p", "recipe", "weight", "gradient_mass_weight", "implicit_objective",
    ]  # fmt: skip
    assert len(df) == 2 * len(ps) and set(df.recipe) == {"grpo", "dr_grpo"}
    grpo, dr = df[df.recipe == "grpo"], df[df.recipe == "dr_grpo"]
    np.testing.assert_allclose(grpo.implicit_objective, [2 * math.asin(math.sqrt(p)) for p in ps])
    np.testing.assert_allclose(dr.implicit_objective, ps)
    assert (dr.weight == 1).all()
    np.testing.assert_allclose(dr.gradient_mass_weight, [p * (1 - p) for p in ps])
    np.testing.assert_allclose(grpo.gradient_mass_weight, [math.sqrt(p * (1 - p)) for p in ps])
    inner = grpo[(grpo.p > 0) & (grpo.p < 1)]
    np.testing.assert_allclose(inner.weight * inner.gradient_mass_weight, 1.0)  # 1/s * s
    assert np.isinf(grpo[grpo.p.isin([0.0, 1.0])].weight).all()


def test_group_size_for_silent_table():
    ps, deltas = [0.0, 0.05, 0.3, 0.5, 1.0], [0.5, 0.1, 0.01]
    df = TT.group_size_for_silent_table(ps, deltas)
    assert list(df.columns) == ["p", "delta", "G"]
    assert len(df) == len(ps) * len(deltas) and df.G.dtype == np.int64
    for r in df.itertuples():
        if r.p in (0.0, 1.0):
            assert r.G == -1
        else:  # G qualifies and G - 1 does not
            p = r.p
            assert p**r.G + (1 - p) ** r.G <= r.delta < p ** (r.G - 1) + (1 - p) ** (r.G - 1)
    assert df.query("p == 0.5 and delta == 0.1").G.item() == 5  # 2 * 2^-5 = 0.0625


# --- group_bias_table ----------------------------------------------------------------------------

BIAS_COLUMNS = [
    "p", "G", "anchor", "scale", "nondegenerate", "baseline", "bias", "adv_correct",
    "adv_correct_true", "adv_wrong", "adv_wrong_true", "hadw_adv_correct", "hadw_adv_wrong",
    "n_groups", "mc_baseline", "mc_baseline_se", "mc_adv_correct", "mc_adv_correct_se",
    "mc_hadw_adv_correct", "mc_hadw_adv_correct_se",
]  # fmt: skip


def test_group_bias_table_columns_values_and_its_own_monte_carlo_check():
    df = TT.group_bias_table([0.05, 0.3, 0.5, 0.9], [2, 4, 8], n_groups=50_000, seed=3)
    assert list(df.columns) == BIAS_COLUMNS and len(df) == 12
    assert df.G.dtype == np.int64 and df.n_groups.dtype == np.int64
    assert (df.anchor == 0.5).all() and (df.scale == 1.0).all()
    # independent formulas (not the exact sums in core.group_bias)
    p, G = df.p.to_numpy(), df.G.to_numpy()
    nondeg = 1 - p**G - (1 - p) ** G
    np.testing.assert_allclose(df.nondegenerate, nondeg)
    np.testing.assert_allclose(df.baseline, (p - p**G) / nondeg)
    np.testing.assert_allclose(df.bias, df.baseline - p, atol=1e-14)
    np.testing.assert_allclose(df.adv_correct_true, 1 - p)
    np.testing.assert_allclose(df.adv_wrong_true, -p)
    np.testing.assert_allclose(df.adv_wrong, -(G - 1) * p / (1 - (1 - p) ** (G - 1)) / G)
    for name in ("baseline", "adv_correct", "hadw_adv_correct"):
        z = (df[f"mc_{name}"] - df[name]).abs() - 4.5 * df[f"mc_{name}_se"]
        assert (z <= 1e-12).all(), (name, z.max())  # G = 2 rows have zero variance
    again = TT.group_bias_table([0.05, 0.3, 0.5, 0.9], [2, 4, 8], n_groups=50_000, seed=3)
    pd.testing.assert_frame_equal(df, again)


def test_group_bias_table_anchor_none_uses_each_rows_pass_rate():
    df = TT.group_bias_table([0.0, 0.1, 1.0], [8], anchor=None, scale=2.0, n_groups=1000)
    np.testing.assert_array_equal(df.anchor, df.p)
    row = df[df.p == 0.1].iloc[0]
    assert row.hadw_adv_correct == pytest.approx(2 * 0.715473, abs=1e-5)
    unanimous = df[df.p != 0.1]  # no non-degenerate group: the check columns are NaN
    assert unanimous.mc_baseline.isna().all() and unanimous.mc_adv_correct_se.isna().all()


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"n_groups": 1}, "n_groups"),
        ({"seed": -1}, "seed"),
        ({"anchor": 1.5}, "anchor"),
        ({"scale": 0}, "scale"),
        ({"ps": [1.5]}, "p"),
        ({"group_sizes": [1]}, "G"),
    ],
)
def test_group_bias_table_bad_inputs_name_the_argument(kwargs, name):
    args = {"ps": [0.3], "group_sizes": [4], **kwargs}
    with pytest.raises(ValueError, match=rf"^{name} "):
        TT.group_bias_table(**args)

"""Difficulty tables against hand-computed numbers, brute-force enumeration and loop references."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from grpo_dial.analysis import difficulty as d
from grpo_dial.passrates.synthetic import synthetic_bigmath_like
from grpo_dial.passrates.tables import validate_passrates

EXTREME, MEDIUM = "extreme (0<p<0.1 or 0.9<p<1)", "medium (0.4<=p<=0.6)"
NEVER, ALWAYS = "never (p=0)", "always (p=1)"


def make_table(n: list[int], k: list[int]) -> pd.DataFrame:
    n_, k_ = np.asarray(n), np.asarray(k)
    return validate_passrates(
        pd.DataFrame(
            {
                "prompt_id": [f"x{i}" for i in range(len(n_))],
                "source": "hand",
                "difficulty": None,
                "n": n_,
                "k": k_,
                "p_hat": k_ / n_,
                "mean_len_correct": np.nan,
                "mean_len_incorrect": np.nan,
            }
        )
    )


# p = 0, 0.05, 0.5, 0.95, 1 (one never-solved and one always-solved prompt)
FIVE = make_table([20] * 5, [0, 1, 10, 19, 20])
tables = st.lists(
    st.integers(1, 40).flatmap(lambda n: st.tuples(st.just(n), st.integers(0, n))),
    min_size=1,
    max_size=30,
).map(lambda nk: make_table([a for a, _ in nk], [b for _, b in nk]))


def _share(mass: pd.DataFrame, band: str, recipe: str) -> float:
    row = mass[(mass["band"] == band) & (mass["recipe"] == recipe)]
    assert len(row) == 1
    return float(row["share"].iloc[0])


# --------------------------------------------------------------------------- mass shares


def test_mass_shares_hand_computed() -> None:
    mass = d.mass_shares(FIVE, "five")
    assert set(mass["table"]) == {"five"}
    # GRPO weights sqrt(p(1-p)): 0, 0.217945, 0.5, 0.217945, 0 -> total 0.935890
    assert _share(mass, EXTREME, "grpo") == pytest.approx(0.435890 / 0.935890, abs=1e-6)
    assert _share(mass, MEDIUM, "grpo") == pytest.approx(0.5 / 0.935890, abs=1e-6)
    # Dr. GRPO weights p(1-p): 0, 0.0475, 0.25, 0.0475, 0 -> total 0.345
    assert _share(mass, EXTREME, "dr_grpo") == pytest.approx(0.095 / 0.345)
    assert _share(mass, MEDIUM, "dr_grpo") == pytest.approx(0.25 / 0.345)
    assert _share(mass, NEVER, "grpo") == 0 and _share(mass, ALWAYS, "dr_grpo") == 0
    assert _share(mass, "decile 1 [0.0, 0.1)", "dr_grpo") == pytest.approx(0.0475 / 0.345)
    assert _share(mass, "decile 10 [0.9, 1.0]", "dr_grpo") == pytest.approx(0.0475 / 0.345)
    counts = mass[mass["recipe"] == "grpo"].set_index("band")["n_prompts"]
    assert counts[NEVER] == counts[ALWAYS] == 1 and counts[EXTREME] == 2 and counts[MEDIUM] == 1
    assert counts["decile 1 [0.0, 0.1)"] == 2 and counts["decile 10 [0.9, 1.0]"] == 2


def test_band_edges_follow_design() -> None:
    # p = 0, 0.1, ..., 1: edges 0.1 and 0.9 are not extreme, 0.4 and 0.6 are medium
    mass = d.mass_shares(make_table([10] * 11, list(range(11))), "edges")
    counts = mass[mass["recipe"] == "grpo"].set_index("band")["n_prompts"]
    assert counts[EXTREME] == 0 and counts[MEDIUM] == 3
    deciles = [b for b, _ in d.DECILE_BANDS]
    assert [counts[b] for b in deciles] == [1] * 9 + [2]  # last decile is closed: 0.9 and 1


def test_all_unanimous_has_no_mass() -> None:
    mass = d.mass_shares(make_table([4, 4], [0, 4]), "silent")
    deciles = mass[mass["band"].str.startswith("decile")]
    assert deciles["share"].isna().all()


@settings(max_examples=60, deadline=None)
@given(tables)
def test_decile_shares_partition_the_mass(table: pd.DataFrame) -> None:
    mass = d.mass_shares(table, "t")
    deciles = mass[mass["band"].str.startswith("decile")]
    assert (deciles.groupby("recipe")["n_prompts"].sum() == len(table)).all()
    p = table["p_hat"].to_numpy()
    if ((p > 0) & (p < 1)).any():
        np.testing.assert_allclose(deciles.groupby("recipe")["share"].sum(), 1.0)


# --------------------------------------------------------------------------- histogram


def test_histogram_hand_counts() -> None:
    hist = d.histogram(FIVE, "five", bins=4)
    bins = hist[hist["kind"] == "bin"]
    assert list(bins["count"]) == [2, 0, 1, 2]  # 0.5 opens the third bin; 1 closes the last
    np.testing.assert_allclose(bins["bin_lo"], [0, 0.25, 0.5, 0.75])
    ends = hist[hist["kind"] != "bin"].set_index("kind")
    assert ends.loc["never", "count"] == 1 and ends.loc["always", "count"] == 1
    assert ends.loc["always", "fraction"] == pytest.approx(0.2)
    with pytest.raises(ValueError, match="bins"):
        d.histogram(FIVE, "five", bins=0)


@settings(max_examples=50, deadline=None)
@given(tables, st.integers(1, 25))
def test_histogram_counts_every_prompt_once(table: pd.DataFrame, bins: int) -> None:
    hist = d.histogram(table, "t", bins=bins)
    assert hist.loc[hist["kind"] == "bin", "count"].sum() == len(table)
    assert hist.loc[hist["kind"] == "bin", "fraction"].sum() == pytest.approx(1.0)


# --------------------------------------------------------------------------- silent fractions


def test_closed_form_silent_fraction_is_direct_mean() -> None:
    table = make_table([20, 20, 20, 20, 20, 7, 1], [0, 1, 10, 19, 20, 3, 1])
    sil = d.silent_fractions(table, "t", group_sizes=(1, 2, 8))
    closed = sil[sil["method"] == "closed_form"].set_index("G")
    for G in (1, 2, 8):
        p = [k / n for n, k in zip(table["n"], table["k"], strict=True)]
        want_c = sum(q**G for q in p) / len(p)
        want_w = sum((1 - q) ** G for q in p) / len(p)
        assert closed.loc[G, "all_correct"] == pytest.approx(want_c)
        assert closed.loc[G, "all_wrong"] == pytest.approx(want_w)
        assert closed.loc[G, "silent_fraction"] == pytest.approx(want_c + want_w)
    assert closed.loc[1, "silent_fraction"] == pytest.approx(1.0)  # singleton groups are silent


def _brute_force(n: int, k: int, G: int) -> tuple[float, float]:
    """(all correct, all wrong) shares over every G-subset of n rollouts, the first k correct."""
    subsets = list(itertools.combinations(range(n), G))
    correct = sum(all(i < k for i in s) for s in subsets)
    wrong = sum(all(i >= k for i in s) for s in subsets)
    return correct / len(subsets), wrong / len(subsets)


def test_subsampled_matches_enumeration_over_subsets() -> None:
    nk = [(8, 0), (8, 3), (8, 8), (16, 5), (16, 1), (12, 6), (4, 2), (3, 1)]
    table = make_table([n for n, _ in nk], [k for _, k in nk])
    sil = d.silent_fractions(table, "t", group_sizes=(1, 2, 3, 4, 8))
    sub = sil[sil["method"] == "subsampled"].set_index("G")
    assert 8 not in sub.index  # no prompt logged 32 rollouts
    for G in (1, 2, 3, 4):
        rows = [(n, k) for n, k in nk if G <= n / 4]
        shares = np.array([_brute_force(n, k, G) for n, k in rows])  # (M, 2)
        assert sub.loc[G, "n_prompts"] == len(rows)
        assert sub.loc[G, "all_correct"] == pytest.approx(shares[:, 0].mean())
        assert sub.loc[G, "all_wrong"] == pytest.approx(shares[:, 1].mean())
        assert sub.loc[G, "silent_fraction"] == pytest.approx(shares.sum(1).mean())
    with pytest.raises(ValueError, match="group_sizes"):
        d.silent_fractions(table, "t", group_sizes=(0, 4))


# --------------------------------------------------------------------------- group size


def test_recommended_group_size_matches_paper_table() -> None:
    per_prompt = d.recommended_group_size(FIVE, "five", fidelity=0.9)
    assert list(per_prompt.columns) == [
        "table", "prompt_id", "p_hat", "fidelity", "g_exact", "g_closed_form",
    ]  # fmt: skip
    # DESIGN 1.3, 90% column: p = 0.05 -> 42 (closed form 26.3), p = 0.5 -> 7 (5); symmetric
    assert list(per_prompt["g_exact"]) == [-1, 42, 7, 42, -1]
    np.testing.assert_allclose(per_prompt["g_closed_form"][1:4], [26.3158, 5.0, 26.3158], atol=1e-4)
    assert np.isinf(per_prompt["g_closed_form"].iloc[[0, 4]]).all()
    bands = d.recommended_group_size_by_band(per_prompt).set_index("band")
    assert bands.loc[MEDIUM, "median_g_exact"] == 7 and bands.loc[EXTREME, "max_g_exact"] == 42
    assert bands.loc[NEVER, "n_prompts"] == 1 and bands.loc[NEVER, "n_reachable"] == 0
    assert math.isnan(bands.loc[ALWAYS, "median_g_exact"])
    with pytest.raises(ValueError, match="fidelity"):
        d.recommended_group_size(FIVE, "five", fidelity=1.0)


# --------------------------------------------------------------------------- budget allocation


def _expected_sigma_loop(p: float, G: int) -> float:
    return sum(
        math.comb(G, k) * p**k * (1 - p) ** (G - k) * math.sqrt(k * (G - k)) / G
        for k in range(G + 1)
    )


def test_budget_allocation_uniform_by_loop_and_allocated_within_budget() -> None:
    totals, bands = d.budget_allocation(FIVE, "five", per_prompt_budget=8, signal="grpo")
    totals = totals.set_index("scheme")
    p = [0, 0.05, 0.5, 0.95, 1]
    want = sum(_expected_sigma_loop(q, 8) for q in p)
    assert totals.loc["uniform", "samples"] == 40
    assert totals.loc["uniform", "expected_signal_total"] == pytest.approx(want)
    assert totals.loc["uniform", "expected_signal_per_sample"] == pytest.approx(want / 40)
    silent = sum(q**8 + (1 - q) ** 8 for q in p) / 5
    assert totals.loc["uniform", "silent_fraction_expected"] == pytest.approx(silent)
    assert totals.loc["allocated", "samples"] <= 40 and totals.loc["allocated", "n_funded"] == 3
    # the uniform split restricted to solvable prompts is feasible for the allocator
    assert totals.loc["allocated", "expected_signal_total"] >= want - 1e-12
    spent = bands.set_index(["scheme", "band"])["samples"]
    assert spent[("allocated", NEVER)] == 0 and spent[("allocated", ALWAYS)] == 0
    assert spent[("uniform", NEVER)] == 8
    with pytest.raises(ValueError, match="signal.*valid: grpo, dr_grpo, nonsilent"):
        d.budget_allocation(FIVE, "five", signal="dapo")


@settings(max_examples=40, deadline=None)
@given(tables, st.integers(1, 12), st.sampled_from(["grpo", "dr_grpo", "nonsilent"]))
def test_allocation_never_exceeds_budget(table: pd.DataFrame, budget: int, signal: str) -> None:
    totals, bands = d.budget_allocation(
        table, "t", per_prompt_budget=budget, signal=signal, g_min=2, g_max=16
    )
    totals = totals.set_index("scheme")
    assert totals.loc["allocated", "samples"] <= budget * len(table)
    assert totals.loc["uniform", "samples"] == budget * len(table)
    deciles = bands[bands["band"].str.startswith("decile")]
    spent = deciles.groupby("scheme")["samples"].sum()
    assert spent["uniform"] == totals.loc["uniform", "samples"]
    assert spent["allocated"] == totals.loc["allocated", "samples"]
    funded = totals.loc["allocated", "n_funded"]
    assert funded <= ((table["p_hat"] > 0) & (table["p_hat"] < 1)).sum()


@pytest.mark.parametrize("signal", ["grpo", "dr_grpo", "nonsilent"])
def test_allocate_budget_per_rate_equals_theory(signal: str) -> None:
    from grpo_dial.core import theory

    rng = np.random.default_rng(3)
    for _ in range(25):
        # rates 0..3/8 and 1 only: no p <-> 1-p pairs, whose equal gains theory breaks anyhow
        p = rng.choice([0.0, 0.125, 0.25, 0.375, 1.0], size=int(rng.integers(1, 40)))
        budget = int(rng.integers(0, 10 * len(p) + 3))
        g_min = int(rng.integers(1, 4))
        g_max = int(rng.integers(g_min, 20))
        ours = d.allocate_budget(p, budget, signal, g_min, g_max)
        ref = theory.allocate_budget(p, budget, signal, g_min, g_max)
        for rate in np.unique(p):  # which prompts of one rate get the extra sample is free
            assert sorted(ours[p == rate]) == sorted(ref[p == rate])
    q = rng.uniform(0.01, 0.99, 300)  # distinct rates: the very same allocation
    want = theory.allocate_budget(q, 2400, signal)
    assert np.array_equal(d.allocate_budget(q, 2400, signal), want)


# --------------------------------------------------------------------------- summary and speed


def test_summary_hand_computed() -> None:
    s = d.summary(FIVE, "five").set_index("metric")["value"]
    assert set(d.summary(FIVE, "five")["table"]) == {"five"}
    assert s["n_prompts"] == 5
    assert s["never_solved_fraction"] == pytest.approx(0.2)
    assert s["always_solved_fraction"] == pytest.approx(0.2)
    assert s["extreme_share_dr_grpo"] == pytest.approx(0.095 / 0.345)
    assert s["medium_share_grpo"] == pytest.approx(0.5 / 0.935890, abs=1e-6)
    silent8 = (2 + 0.05**8 + 0.95**8 + 2 * 0.5**8 + 0.95**8 + 0.05**8) / 5
    assert s["silent_fraction_G8"] == pytest.approx(silent8)


def test_bad_tables_raise_clear_errors() -> None:
    with pytest.raises(ValueError, match="empty"):
        d.summary(FIVE.iloc[:0], "empty")
    with pytest.raises(ValueError, match="lacks column.*k"):
        d.silent_fractions(FIVE.drop(columns="k"), "t")


def test_bigmath_sized_table_matches_the_reference_shape() -> None:
    # Speed is measured by the benchmark, not asserted here (shared, noisy machines).
    table, _ = synthetic_bigmath_like(n_prompts=215_608, seed=1)
    d.histogram(table, "big")
    d.mass_shares(table, "big")
    silent = d.silent_fractions(table, "big")
    d.recommended_group_size_by_band(d.recommended_group_size(table, "big"))
    d.budget_allocation(table, "big")
    summary = d.summary(table, "big").set_index("metric")["value"]
    # the synthetic prior is shaped like Big-Math (DESIGN 1.3): 59/44% silent at G = 4/8
    closed = silent[silent["method"] == "closed_form"].set_index("G")["silent_fraction"]
    assert closed[4] == pytest.approx(0.59, abs=0.01) and closed[8] == pytest.approx(0.44, abs=0.01)
    assert summary["extreme_share_grpo"] == pytest.approx(0.247, abs=0.01)

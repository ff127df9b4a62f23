"""The adaptive-vs-uniform comparison on hand-made run tables with known answers."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from grpo_dial.analysis import allocation as ac
from grpo_dial.analysis.summary.page import summary_markdown


def _runs(final: dict[str, list[float]], samples_per_step=32, steps=4):
    """steps / evals tables: accuracy rises linearly from 0.4 to `final` over `steps` steps."""
    step_rows, eval_rows = [], []
    for dial, finals in final.items():
        for seed, acc in enumerate(finals):
            for step in range(1, steps + 1):
                silent = 0.5 if dial == "uniform" else 0.3
                step_rows.append((dial, seed, step, samples_per_step, silent))
            for step in (0, steps // 2, steps):
                a = 0.4 + (acc - 0.4) * step / steps
                for mode in ("sampled", "greedy"):
                    eval_rows.append((dial, seed, step, mode, "all", a))
                eval_rows.append((dial, seed, step, "sampled", "easy", 0.9))
    steps_df = pd.DataFrame(step_rows, columns="dial seed step samples silent_fraction".split())
    evals = pd.DataFrame(eval_rows, columns="dial seed step mode difficulty accuracy".split())
    return steps_df, evals


def test_curves_count_samples_spent_by_each_evaluation():
    steps, evals = _runs({"uniform": [0.5], "adaptive": [0.6]})
    curves = ac.accuracy_curves(steps, evals)
    one = curves.query("dial == 'adaptive' and mode == 'sampled'")
    assert one["samples"].tolist() == [0.0, 64.0, 128.0]
    assert one["accuracy"].tolist() == pytest.approx([0.4, 0.5, 0.6])
    assert set(curves["mode"]) == {"sampled", "greedy"}  # difficulty 'all' only: 3 evals x 2


def test_samples_to_reach_interpolates_and_says_never():
    curve = pd.DataFrame({"samples": [0.0, 100.0, 200.0], "accuracy": [0.4, 0.5, 0.7]})
    assert ac.samples_to_reach(curve, 0.6) == pytest.approx(150.0)
    assert ac.samples_to_reach(curve, 0.3) == 0.0
    assert np.isnan(ac.samples_to_reach(curve, 0.8))


def test_comparison_intervals_and_paired_difference():
    finals = {"uniform": [0.50, 0.52, 0.48], "adaptive": [0.56, 0.60, 0.55]}
    steps, evals = _runs(finals)
    curves = ac.accuracy_curves(steps, evals)
    table = ac.compare_arms(curves, steps, {"adaptive": "uniform"})
    row = table.set_index("metric").loc["final_sampled_accuracy"]
    diff = np.subtract(finals["adaptive"], finals["uniform"])
    half = stats.t.ppf(0.975, 2) * diff.std(ddof=1) / np.sqrt(3)
    assert row["diff_mean"] == pytest.approx(diff.mean())
    assert row["diff_lo"] == pytest.approx(diff.mean() - half)
    assert row["n_seeds"] == 3 and row["target"] == pytest.approx(0.5)
    reach = table.set_index("metric").loc["samples_to_target"]
    # adaptive climbs faster, so it reaches the uniform arm's mean final accuracy sooner
    assert reach["adaptive_mean"] < reach["uniform_mean"] and reach["reached_adaptive"] == 3
    assert reach["reached_uniform"] == 2  # the seed ending at 0.48 never gets to 0.50
    silent = table.set_index("metric").loc["silent_fraction"]
    assert silent["diff_mean"] == pytest.approx(-0.2)
    text = summary_markdown({"allocation/comparison.csv": table})
    assert "Adaptive against uniform group sizes" in text and "adaptive higher" in text


def test_silent_sample_share_counts_samples_not_groups():
    responses = pd.DataFrame(
        {"dial": ["a"] * 6 + ["b"] * 4, "seed": 0,
         "k": [0, 0, 1, 1, 1, 1, 2, 2, 0, 0], "G": [2, 2, 4, 4, 4, 4, 2, 2, 2, 2]}
    )  # fmt: skip
    share = ac.silent_sample_share(responses)
    assert share.loc[("a", 0)] == pytest.approx(2 / 6) and share.loc[("b", 0)] == 1.0
    steps, evals = _runs({"uniform": [0.5, 0.5], "adaptive": [0.5, 0.5]})
    fake = pd.concat(
        [responses.assign(dial=d, seed=s) for d in ("adaptive", "uniform") for s in (0, 1)]
    )
    table = ac.compare_arms(ac.accuracy_curves(steps, evals), steps, {"adaptive": "uniform"},
                            responses=fake).set_index("metric")  # fmt: skip
    assert table.loc["silent_sample_share", "diff_mean"] == 0.0


def test_comparison_needs_both_arms():
    steps, evals = _runs({"uniform": [0.5]})
    with pytest.raises(ValueError, match="no seed has both arms"):
        ac.compare_arms(ac.accuracy_curves(steps, evals), steps, {"adaptive": "uniform"})


def test_samples_by_band_shares():
    allocation = pd.DataFrame(
        {"dial": "a", "seed": 0, "step": 1, "band": ["medium", "medium", "extreme", "never"],
         "G": [4, 6, 20, 0]}
    )  # fmt: skip
    out = ac.samples_by_band(allocation).set_index("band")
    assert out.loc["medium", "mean_G"] == 5 and out.loc["medium", "samples"] == 10
    assert out.loc["extreme", "samples_share"] == pytest.approx(20 / 30)
    assert out.loc["never", "unsampled_share"] == 1.0


def test_figure_draws_from_the_tables(tmp_path):
    from grpo_dial.figures import save
    from grpo_dial.figures.allocation import allocation_figure

    steps, evals = _runs({"uniform": [0.5, 0.52], "adaptive": [0.56, 0.6]})
    allocation = pd.DataFrame(
        {"dial": ["uniform"] * 2 + ["adaptive"] * 2, "seed": 0, "step": 1,
         "band": ["medium", "extreme"] * 2, "G": [8, 8, 4, 12]}
    )  # fmt: skip
    fig = allocation_figure(
        ac.curve_intervals(ac.accuracy_curves(steps, evals)),
        ac.ordered_bands(ac.samples_by_band(allocation)),
        {"adaptive": "uniform"},
    )
    assert "adaptive +0.070" in fig._suptitle.get_text()
    save(fig, tmp_path / "a.png", tmp_path / "a.pdf")
    assert (tmp_path / "a.png").stat().st_size > 10_000


def test_curve_intervals_are_the_seed_mean_and_t_interval():
    curves = pd.DataFrame({
        "dial": "a", "seed": [0, 1, 2, 0], "step": [5, 5, 5, 10], "mode": "sampled",
        "samples": [40.0, 44.0, 48.0, 80.0], "accuracy": [0.2, 0.4, 0.9, 0.5],
    })  # fmt: skip
    got = ac.curve_intervals(curves)
    assert list(got.columns) == list(ac.INTERVAL_COLUMNS) and got["step"].tolist() == [5, 10]
    first = got.iloc[0]
    x = np.array([0.2, 0.4, 0.9])
    half = stats.t.ppf(0.975, 2) * x.std(ddof=1) / np.sqrt(3)
    assert (first["n_seeds"], first["samples"]) == (3, 44.0)
    assert first["accuracy_mean"] == pytest.approx(0.5)
    assert (first["accuracy_lo"], first["accuracy_hi"]) == pytest.approx((0.5 - half, 0.5 + half))
    assert got.iloc[1]["accuracy_mean"] == 0.5 and np.isnan(got.iloc[1]["accuracy_lo"])  # 1 seed


def test_ordered_bands_low_to_high_pass_rate_then_other_labels():
    table = pd.DataFrame({"band": ["other", "unrated", "always", "never", "medium"]})
    band = ac.ordered_bands(table)["band"]
    assert band.cat.ordered and list(band.cat.categories) == [
        "never", "medium", "other", "always", "unrated",
    ]  # fmt: skip
    assert band.astype(str).tolist() == table["band"].tolist()  # rows keep their order


def test_two_seeds_give_no_interval_and_the_summary_prints_the_seeds():
    """Two seeds: no t interval on one degree of freedom (it put samples_to_target at
    86 [-36, 208], a count below zero); the table keeps each side's count and values."""
    steps, evals = _runs({"uniform": [0.50, 0.54], "adaptive": [0.56, 0.60]})
    table = ac.compare_arms(ac.accuracy_curves(steps, evals), steps, {"adaptive": "uniform"})
    reach = table.set_index("metric").loc["samples_to_target"]
    # target 0.52: adaptive at 64 + 64 (0.04 / 0.08) = 96 and 64 + 64 (0.02 / 0.10) = 76.8;
    # uniform only on seed 1 at 64 + 64 (0.05 / 0.07)
    assert np.isnan(reach["adaptive_lo"]) and np.isnan(reach["adaptive_hi"])
    assert (reach["adaptive_n"], reach["adaptive_min"]) == (2, pytest.approx(76.8))
    assert reach["adaptive_max"] == pytest.approx(96.0) and reach["uniform_n"] == 1
    assert reach["diff_n"] == 1 and reach["diff_mean"] == pytest.approx(76.8 - 64 - 320 / 7)
    text = summary_markdown({"allocation/comparison.csv": table})
    line = next(x for x in text.splitlines() if "samples to reach accuracy 0.520" in x)
    cells = [c.strip() for c in line.strip("|").split("|")]
    assert cells[3:] == [
        "2 seeds: 77, 96 (no interval below 3 seeds)", "1 seed: 110 (no interval below 3 seeds)",
        "1 seed: -33 (no interval below 3 seeds) (2 / 1 of 2 seeds got there)",
        "no verdict without an interval",
    ]  # fmt: skip

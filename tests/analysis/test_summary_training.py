"""Tests for grpo_dial.analysis.summary.training: the trained policy's sections of the run summary,
each number recomputed here from the rows it summarizes."""

from __future__ import annotations

import numpy as np
import pandas as pd

from grpo_dial.analysis.summary.page import summary_markdown
from grpo_dial.analysis.summary.training import WINDOWS, headline, samples_per_step

RNG = np.random.default_rng(0)
COLUMNS = ("accuracy_before accuracy_after heldout_sampled_before heldout_sampled_after "
           "heldout_greedy_before heldout_greedy_after length_before length_after total mix "
           "within_correct within_incorrect within_incorrect_work within_incorrect_redundant "
           "incorrect_share final_silent_fraction extreme_mass_share").split()  # fmt: skip


def _runs():
    """decompose/summary.csv of three arms x two seeds with random numbers, and the steps table:
    GRPO samples 128 a step, DAPO refills (more), the adaptive arm leaves some budget unspent."""
    rows, steps = [], []
    per_step = {"grpo": [128] * 4, "dapo": [128, 256, 192, 128],
                "grpo_adaptive": [128, 120, 124, 128]}  # fmt: skip
    for dial in per_step:
        for seed in (0, 1):
            values = RNG.uniform(0, 1, len(COLUMNS))
            row = {"dial": dial, "seed": seed, **dict(zip(COLUMNS, values, strict=True))}
            for term in ("total", "incorrect_share", "within_incorrect", "within_correct"):
                row[f"{term}_lo"], row[f"{term}_hi"] = row[term] - 0.1, row[term] + 0.1
            row["extra_samples"] = sum(per_step[dial]) - 4 * 128  # negative for the adaptive arm
            rows.append(row)
            steps += [{"dial": dial, "seed": seed, "step": s + 1, "samples": n}
                      for s, n in enumerate(per_step[dial])]  # fmt: skip
    return pd.DataFrame(rows), pd.DataFrame(steps)


def test_rl_runs_are_means_over_seeds_with_samples_per_step_never_negative():
    runs, steps = _runs()
    text = summary_markdown({"decompose/summary.csv": runs, "decompose/all_steps.parquet": steps})
    assert "## RL runs: accuracy and length by correctness" in text
    assert "float rounding" in text  # flagged as machine-dependent
    dapo = runs[runs["dial"] == "dapo"]
    before, after = dapo["heldout_sampled_before"].mean(), dapo["heldout_sampled_after"].mean()
    assert f"| DAPO | 2 | {dapo['accuracy_before'].mean():.3f} -> " in text
    assert f"| {before:.3f} -> {after:.3f} |" in text
    assert f"| {dapo['total'].mean():+.1f} | {dapo['within_incorrect'].mean():+.1f} |" in text
    # samples per step: counted responses, DAPO's refills above GRPO's 128, the adaptive arm's
    # unspent budget below it; never a negative count
    assert f"| {np.mean([128, 256, 192, 128]):.1f} ({176 / 128:.2f}x) |" in text
    assert f"| {np.mean([128, 120, 124, 128]):.1f} ({125 / 128:.2f}x) |" in text
    assert "-" not in "".join(line.split("|")[-2] for line in text.splitlines()
                              if line.startswith("| GRPO, adaptive G |"))  # fmt: skip
    gain = {d: 100 * (f["heldout_sampled_after"].mean() - f["heldout_sampled_before"].mean())
            for d, f in runs.groupby("dial")}  # fmt: skip
    lo, hi = min(gain, key=gain.get), max(gain, key=gain.get)
    names = {"grpo": "GRPO", "dapo": "DAPO", "grpo_adaptive": "GRPO, adaptive G"}
    assert (f"gain, mean over seeds: {gain[lo]:+.1f} ({names[lo]}) to {gain[hi]:+.1f} "
            f"({names[hi]}) points") in text  # fmt: skip
    per_run = runs.iloc[0]
    assert (f"| GRPO | 0 | {per_run['total']:+.1f} [{per_run['total_lo']:+.1f}, "
            f"{per_run['total_hi']:+.1f}] |") in text  # fmt: skip
    assert "[`decompose/all_steps.parquet`](decompose/all_steps.parquet)" in text


def test_samples_per_step_is_the_mean_count_per_run():
    _, steps = _runs()
    got = samples_per_step(steps)
    assert got.loc[("dapo", 1)] == 176.0 and (got >= 0).all()
    assert samples_per_step(None) is None


def test_trained_sections_come_and_go_with_their_tables():
    runs, steps = _runs()
    pressure = pd.DataFrame({
        "dial": ["grpo", "dr_grpo"], "normalizer": ["sequence", "constant"], "n_seeds": 2,
        "pressure_wrong": [2.72, 0.0], "pressure_wrong_lo": [2.42, 0.0],
        "pressure_wrong_hi": [3.01, 0.0], "pressure_net": [1.82, 0.0],
        "pressure_net_lo": [1.5, 0.0], "pressure_net_hi": [2.1, 0.0],
        "within_incorrect": [4.6, 3.9],
        "within_incorrect_lo": [4.3, 2.5], "within_incorrect_hi": [4.9, 5.3],
    })  # fmt: skip
    prediction = pd.DataFrame({"inflation": ["within_incorrect"], "spearman_rho": [0.11],
                               "inflation_gap": [0.36], "n_runs": [12]})  # fmt: skip
    identity = pd.DataFrame(
        {
            "dial": ["grpo"],
            "length_norm": ["sequence"],
            "seq_relative_residual": [3e-16],
            "token_cosine": [0.96],
        }
    )
    steps["lambda"] = np.where(steps["dial"] == "grpo", np.nan, steps["step"] / 10)
    tables = {
        "decompose/summary.csv": runs, "decompose/all_steps.parquet": steps,
        "decompose/all_identity.parquet": identity, "length_pressure/summary.csv": pressure,
        "length_pressure/prediction.csv": prediction,
    }  # fmt: skip
    text = summary_markdown(tables)
    headings = [line for line in text.splitlines() if line.startswith("## ")]
    assert headings == ["## RL runs: accuracy and length by correctness",
                        "## Identity on the trained model", "## Length pressure in the RL runs",
                        "## Estimators"]  # fmt: skip
    row = "| GRPO | sequence | 2 | 2.72 [2.42, 3.01] | 1.82 [1.50, 2.10] | +4.6 [+4.3, +4.9] |"
    assert row in text
    assert "Across 12 runs the Spearman correlation between pressure and inflation is 0.11" in text
    assert "| DAPO | lambda-GRPO (learnable): lambda | 0.100 -> 0.400 |" in text  # first -> last
    steps["lambda"] = np.nan  # no arm logs an estimator quantity: no section
    text = summary_markdown(dict(tables, **{"decompose/all_identity.parquet": identity.iloc[:0]}))
    assert "## Estimators" not in text and "## Identity on the trained model" not in text


def test_base_policy_mean_and_levels_are_recomputed_from_the_prompts():
    k = np.array([0, 8, 32, 1, 2, 3])
    table = pd.DataFrame({"prompt_id": range(6), "difficulty": ["o3d3"] * 2 + ["o2d1"] * 4,
                          "n": 32, "k": k, "p_hat": k / 32})  # fmt: skip
    text = summary_markdown({"passrates/base_policy.parquet": table})
    assert f"Mean pass rate {k.mean() / 32:.3f} over 6 prompts (32 samples each)" in text
    hard, easy = k[:2].mean() / 32, k[2:].mean() / 32
    assert text.index(f"| o3d3 | 2 | {hard:.3f} |") < text.index(f"| o2d1 | 4 | {easy:.3f} |")


def _comparison(seeds: dict[str, list[float]], level: float = 0.95) -> pd.DataFrame:
    """allocation/comparison.csv's samples_to_target row from each side's seed values: the t
    interval from scipy from 3 seeds on, none below (seed_stats' rule), written out here."""
    from scipy import stats

    row = {
        "adaptive": "grpo_adaptive",
        "uniform": "grpo",
        "metric": "samples_to_target",
        "n_seeds": len(seeds["adaptive"]),
        "target": 0.5,
        "reached_adaptive": len(seeds["adaptive"]),
        "reached_uniform": len(seeds["uniform"]),
    }
    for side, x in seeds.items():
        x = np.array(x)
        half = (stats.t.ppf((1 + level) / 2, len(x) - 1) * x.std(ddof=1) / np.sqrt(len(x))
                if len(x) >= 3 else np.nan)  # fmt: skip
        row |= {f"{side}_mean": x.mean(), f"{side}_lo": x.mean() - half,
                f"{side}_hi": x.mean() + half, f"{side}_n": len(x), f"{side}_min": x.min(),
                f"{side}_max": x.max()}  # fmt: skip
    return pd.DataFrame([row])


def _allocation_row(text: str) -> list[str]:
    line = next(x for x in text.splitlines() if x.startswith("| GRPO, adaptive G vs GRPO |"))
    return [cell.strip() for cell in line.strip("|").split("|")]


def test_allocation_prints_the_seeds_not_an_interval_below_three_seeds():
    two = _comparison({"adaptive": [2400.0, 3066.0], "uniform": [2800.0, 3200.0],
                       "diff": [-400.0, -134.0]})  # fmt: skip
    cells = _allocation_row(summary_markdown({"allocation/comparison.csv": two}))
    why = "(no interval below 3 seeds)"
    assert cells == [
        "GRPO, adaptive G vs GRPO", "samples to reach accuracy 0.500", "2",
        f"2 seeds: 2400, 3066 {why}", f"2 seeds: 2800, 3200 {why}",
        f"2 seeds: -400, -134 {why} (2 / 2 of 2 seeds got there)", "no verdict without an interval",
    ]  # fmt: skip
    assert "-" not in cells[3] + cells[4]  # a count is never printed below zero


def test_allocation_prints_the_t_interval_from_three_seeds():
    three = _comparison({"adaptive": [2400.0, 3066.0, 2733.0], "uniform": [2800.0, 3200.0, 3000.0],
                         "diff": [-400.0, -134.0, -267.0]})  # fmt: skip
    cells = _allocation_row(summary_markdown({"allocation/comparison.csv": three}))
    # t_{0.975, 2} = 4.3027: 2733 +- 4.3027 x 333 / sqrt 3, 3000 +- 4.3027 x 200 / sqrt 3, and
    # -267 +- 4.3027 x 133 / sqrt 3
    assert cells[2:] == [
        "3", "2733 [1906, 3560]", "3000 [2503, 3497]",
        "-267 [-597, +63] (3 / 3 of 3 seeds got there)", "no detectable difference",
    ]  # fmt: skip
    assert "-" not in cells[3] + cells[4]


def test_length_pressure_from_two_seeds_prints_the_seeds():
    from grpo_dial.analysis.length_bias.pressure import dial_summary

    per_run = pd.DataFrame({
        "dial": "grpo", "seed": [0, 1], "normalizer": "sequence", "pressure_wrong": [2.5, 3.0],
        "pressure_net": [1.5, 2.0], "wrong_length_change": [4.0, -1.0],
        "correct_length_change": [0.0, 0.0], "within_incorrect": [4.6, np.nan],
    })  # fmt: skip
    text = summary_markdown({"length_pressure/summary.csv": dial_summary(per_run)})
    why = "(no interval below 3 seeds)"
    assert (f"| GRPO | sequence | 2 | 2 seeds: 2.50, 3.00 {why} | 2 seeds: 1.50, 2.00 {why} | "
            f"1 seed: +4.6 {why} |") in text  # fmt: skip


def _terms(total, lo, hi, wi, wi_lo, wi_hi, wc, wc_lo, wc_hi, share=None):
    return {"total": total, "total_lo": lo, "total_hi": hi, "within_incorrect": wi,
            "within_incorrect_lo": wi_lo, "within_incorrect_hi": wi_hi, "within_correct": wc,
            "within_correct_lo": wc_lo, "within_correct_hi": wc_hi,
            "incorrect_share": wi / total if share is None else share,
            "incorrect_share_lo": 0.5, "incorrect_share_hi": 1.5}  # fmt: skip


def test_the_headline_states_the_stable_terms_and_the_share_only_where_the_total_excludes_0():
    runs = pd.DataFrame([
        {"dial": "grpo", "seed": 0, **_terms(4.0, 2.0, 6.0, 3.6, 2.5, 4.7, 0.5, -0.5, 1.5)},
        {"dial": "grpo", "seed": 1, **_terms(3.0, 1.0, 5.0, 3.0, 2.0, 4.0, 0.1, -1.0, 1.2)},
        # the total's interval holds 0: a share of -689% says nothing, and is not reported
        {"dial": "dapo", "seed": 0, **_terms(-0.5, -2.5, 1.5, 3.4, 2.2, 4.6, -1.0, -2.0, 0.2)},
    ])  # fmt: skip
    text = headline(runs)
    # arm means over seeds: GRPO (3.6 + 3.0) / 2 = +3.3, DAPO +3.4; correct (0.5 + 0.1) / 2 = +0.3
    assert text.startswith(
        "Incorrect responses changed in mean length by +3.3 to +3.4 characters across arms (mean "
        "over seeds; 3 of 3 runs' 90% intervals above 0), correct ones by -1.0 to +0.3 (0 of 3 "
        "above 0)."
    )
    # shares over the two runs whose total excludes 0: 3.6 / 4 = 90%, 3 / 3 = 100%
    assert text.endswith("over the 2 runs whose total change excludes 0: 90% to 100%.")
    only_zero = headline(runs[runs["dial"] == "dapo"])
    assert "share" not in only_zero


def test_the_per_run_table_withholds_the_share_where_the_total_holds_0_and_windows_show():
    runs, _ = _runs()
    runs.loc[0, ["total_lo", "total_hi"]] = [-1.0, 1.0]
    windows = pd.DataFrame({
        "dial": ["grpo"] * 4, "seed": [0, 0, 1, 1], "window_fraction": [0.1, 0.2, 0.1, 0.2],
        "within_incorrect": [3.0, 1.0, 4.0, 2.0], "within_correct": [0.5, -0.5, 1.5, 0.5],
        "share_reported": [True, False, True, True],
    })  # fmt: skip
    text = summary_markdown({"decompose/summary.csv": runs, WINDOWS: windows})
    first = next(line for line in text.splitlines() if line.startswith("| GRPO | 0 |"))
    assert "| n/a (total holds 0) |" in first
    # window 0.1: (3 + 4) / 2 = +3.5 and (0.5 + 1.5) / 2 = +1.0, both runs' shares reported
    assert "| GRPO | +3.5 / +1.0 (2/2) | +1.5 / +0.0 (1/2) |" in text

"""Tests for grpo_dial.analysis.summary.page: the run's front page is read off the tables it is
given, each number recomputed here a second way, and a section comes and goes with its tables."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from grpo_dial.analysis.summary.page import summary_markdown

GROUP_SIZE = pd.DataFrame({
    "p": [0.5, 0.5, 0.05, 0.05], "fidelity": [0.9, 0.99, 0.9, 0.99],
    "g_exact": [7, 51, 42, 273], "g_closed_form_nearest": [5, 50, 26, 263],
})  # fmt: skip
IDENTITY = pd.DataFrame({
    "recipe": ["grpo", "grpo", "dr_grpo"], "G": [2, 8, 8], "k": [1, 3, 3], "dim": [3, 16, 16],
    "max_abs_residual": [0.0, 6.66e-16, 2.2e-16], "relative_residual": [0.0, 6.3e-16, 5e-16],
})  # fmt: skip


def _difficulty(table, n, never, always, silent):
    metrics = {"n_prompts": n, "never_solved_fraction": never, "always_solved_fraction": always,
               "extreme_share_grpo": 0.2484, "extreme_share_dr_grpo": 0.1393,
               "silent_fraction_G8": silent}  # fmt: skip
    return pd.DataFrame({"table": table, "metric": list(metrics), "value": list(metrics.values())})


SIMULATE = pd.DataFrame({
    "arm": ["grpo", "dr_grpo", "dr_grpo_lr_matched"], "lr": [0.5, 0.5, 1.175374942],
    "silent_r2": 0.999, "initial_extreme_mass": [0.1732, 0.1457, 0.1457],
    "realized_extreme_mass": 0.6, "hardest_quartile_final_p": [0.99362, 0.93800, 0.99184],
    "mean_silent_fraction": 0.8, "oversampling_factor": 1.0, "steps_to_mean_p_0_9": [26, 66, 29],
})  # fmt: skip
DAPO = pd.DataFrame(
    {
        "model": ["closed_form", "saturating"],
        "n_params": [1, 2],
        "r2": [0.95, 0.97],
        "r2_lo": [0.9, np.nan],
        "r2_hi": [0.99, np.nan],
    }
)


def _length_bias():
    rows = []
    for arm, drift, ratio in (("grpo", 3.66e-3, 1.0), ("nostd_sequence", 1.46e-3, 0.3988)):
        for aware in (0.0, 1.0):
            d = drift * aware
            rows.append({
                "arm": arm, "awareness": aware, "n_seeds": 3, "measured_drift_wrong": d,
                "measured_drift_wrong_lo": d - 1e-4, "measured_drift_wrong_hi": d + 1e-4,
                "predicted_drift_wrong": d, "tail_wrong_start": 4.0, "tail_wrong_end": 4 + aware,
                "tail_correct_start": 4.0, "tail_correct_end": 4.0,
                "measured_ratio_to_grpo": ratio if aware else np.nan,
                "measured_ratio_to_grpo_lo": ratio - 0.01 if aware else np.nan,
                "measured_ratio_to_grpo_hi": ratio + 0.01 if aware else np.nan,
                "predicted_ratio_to_grpo": 0.3969 if arm != "grpo" else 1.0,
            })  # fmt: skip
    fit = pd.DataFrame({"path": ["wrong", "correct"], "r2": [0.94, 0.89], "n_points": 500,
                        "blind_max_abs_z": [1.09, 0.8]})  # fmt: skip
    return pd.DataFrame(rows), fit


def _real_lengths():
    """Two difficulty rows built from response lengths, so the pooled gap can be recomputed."""
    lengths = {("l1", True): [100, 120], ("l1", False): [300], ("l2", True): [200],
               ("l2", False): [260, 280, 330]}  # fmt: skip
    rows = []
    for level in ("l1", "l2"):
        ok, bad = lengths[(level, True)], lengths[(level, False)]
        rows.append({"source": "math", "difficulty": level, "n_problems": 5, "n_correct": len(ok),
                     "n_incorrect": len(bad), "mean_len_correct": np.mean(ok),
                     "mean_len_incorrect": np.mean(bad), "diff": np.mean(bad) - np.mean(ok),
                     "diff_lo": np.nan, "diff_hi": np.nan})  # fmt: skip
    every_ok = [x for (_, good), xs in lengths.items() if good for x in xs]
    every_bad = [x for (_, good), xs in lengths.items() if not good for x in xs]
    return pd.DataFrame(rows), np.mean(every_bad) - np.mean(every_ok)


def _analysis_tables():
    lb, fit = _length_bias()
    real, _ = _real_lengths()
    return {
        "theory/group_size_table.csv": GROUP_SIZE,
        "theory/identity_residuals.csv": IDENTITY,
        "difficulty/synthetic/summary.csv": _difficulty("synthetic", 20000, 0.0395, 0.0742, 0.4414),
        "simulate/synthetic/summary.csv": SIMULATE,
        "length_bias/synthetic/summary.csv": lb,
        "length_bias/synthetic/fit.csv": fit,
        "dapo/fit_summary.csv": DAPO,
        "real_lengths/by_correctness.csv": real,
    }


HEADINGS = [
    "## Group size for fidelity", "## Identity check", "## Difficulty of the pass-rate tables",
    "## Controlled Bernoulli-logit run", "## Length-bias simulation", "## DAPO consistency",
    "## Length by correctness in logged real responses",
]  # fmt: skip


def _headings(text):
    return [line for line in text.splitlines() if line.startswith("## ")]


def test_analysis_sections_come_in_a_fixed_order_with_their_tables_numbers():
    tables = _analysis_tables()
    text = summary_markdown(dict(reversed(tables.items())))  # input order does not matter
    assert _headings(text) == HEADINGS
    assert "| 0.5 | 7 (5) | 51 (50) |" in text and "| 0.05 | 42 (26) | 273 (263) |" in text
    assert "dimensions 3, 16: 7e-16." in text  # max over rows, 6.66e-16 to one digit
    between = 1 - 0.0395 - 0.0742
    assert f"| synthetic | 20,000 | {100 * between:.1f}% | 4.0% | 7.4% | 24.8% | 13.9%" in text
    assert "| 44.1% |" in text
    # four decimals tell GRPO's 0.9936 from the lr-matched 0.9918 (three would not: 0.994, 0.992)
    assert "| GRPO | 0.5 | 0.999 | 17.3% |" in text and "| 0.9936 |" in text
    assert "| Dr. GRPO, lr matched | 1.18 |" in text and "| 0.9918 |" in text
    assert "| alpha 0, sequence normalizer | 1.46e-03 [1.36e-03, 1.56e-03] | 1.46e-03 |" in text
    assert "0.3988 [0.3888, 0.4088] | 0.3969 |" in text
    assert "wrong path R^2 0.940, correct path R^2 0.890" in text and "|z| = 1.09" in text
    assert "| closed form, one timescale | 1 | 0.950 [0.900, 0.990] |" in text
    assert "| generic saturating | 2 | 0.970 |" in text  # no interval invented
    _, pooled = _real_lengths()
    assert f"math {pooled:+.0f} characters" in text
    for path in tables:
        assert f"[`{path}`]({path})" in text  # every table is named under its section
    assert text.endswith(".\n")


@pytest.mark.parametrize("path", list(_analysis_tables()))
def test_a_section_comes_and_goes_with_its_table(path):
    tables = _analysis_tables()
    present = _headings(summary_markdown(tables))
    without = dict(tables)
    without.pop(path)
    if path == "length_bias/synthetic/fit.csv":  # the fit only adds a line to its section
        text = summary_markdown(without)
        assert "R^2 0.940" not in text and "## Length-bias simulation" in text
        return
    empty = dict(tables, **{path: tables[path].iloc[:0]})
    for reduced in (without, empty):
        headings = _headings(summary_markdown(reduced))
        assert len(headings) == len(present) - 1 and set(headings) < set(present)


def test_every_difficulty_table_gets_a_row_and_the_base_policy_is_flagged():
    tables = {
        "difficulty/synthetic/summary.csv": _difficulty("synthetic", 20000, 0.04, 0.07, 0.44),
        "difficulty/base_policy/summary.csv": _difficulty("base_policy", 256, 0.16, 0.047, 0.41),
    }
    text = summary_markdown(tables)
    assert "| base_policy | 256 | 79.3% | 16.0% | 4.7% |" in text
    assert "`base_policy` is the trained model's own table" in text
    assert "trained model" not in summary_markdown({k: v for k, v in tables.items()
                                                    if "synthetic" in k})  # fmt: skip


def test_identity_angle_is_the_arccos_of_the_smallest_cosine():
    from grpo_dial.analysis.summary.training import identity_model

    identity = pd.DataFrame({
        "dial": ["grpo", "grpo", "std_constant"], "length_norm": ["sequence"] * 2 + ["constant"],
        "seq_relative_residual": [1e-16, 6e-16, 2e-16], "token_cosine": [0.95, 0.78, 1.0],
    })  # fmt: skip
    text = "\n".join(identity_model({"decompose/all_identity.parquet": identity}))
    angle = math.degrees(math.acos(0.78))
    assert f"| GRPO | sequence | 2 | 6.0e-16 | 0.780 | {angle:.0f} |" in text
    assert "| alpha 1, constant normalizer | constant | 1 | 2.0e-16 | 1.000 | 0 |" in text
    assert "sequence level: 6e-16." in text and "float rounding" in text


def test_external_runs_come_last():
    external = pd.DataFrame({"metric": ["silent_fraction"], "value": [0.123456]})
    text = summary_markdown({"external/my_run/summary.csv": external, "dapo/fit_summary.csv": DAPO})
    assert text.index("## DAPO consistency") < text.index("## Imported run my_run")
    assert "silent_fraction 0.123." in text
    assert summary_markdown({}).startswith("# grpo-dial: summary of this run")


def _aware_drift(**columns) -> pd.DataFrame:
    """A drift table as analysis/aware_seeds.drift_table writes it: the log(1 + T) contrast and the
    contrast in tokens per dial, with the rank tests on the log rows."""
    base = {
        "quantity": ["contrast", "contrast", "contrast_tokens", "contrast_tokens"],
        "dial": ["grpo", "dr_grpo", "grpo", "dr_grpo"], "n_seeds": [5, 5, 5, 5],
        "mean": [1.56, -0.03, 18.5, 0.13], "lo": [0.25, -0.12, 2.1, -0.4],
        "hi": [2.43, 0.05, 34.8, 0.6], "min": np.nan, "max": np.nan,
        "sign_p": [0.0625, 1.0, np.nan, np.nan], "wilcoxon_p": [0.1, 0.8125, np.nan, np.nan],
        "n_up": [3, 0, 0, 0], "n_down": [0, 0, 0, 0],
        "takeoff_p": [0.0833, np.nan, np.nan, np.nan], "truncation_last": [0.031, 0.0, 0.0, 0.0],
        "ratio_sgd": [1.0, 0.0, 1.0, 0.0], "ratio_snr": [1.0, 0.02, 1.0, 0.0],
    }  # fmt: skip
    return pd.DataFrame({**base, **columns})


def test_the_aware_tail_section_appears_only_with_its_tables():
    from grpo_dial.analysis.summary.page import summary_markdown

    bridge = pd.DataFrame({
        "source": ["math_cot_100", "math_cot_100", "gsm8k", "gsm8k"],
        "quantity": ["auc", "pressure_wrong"] * 2, "value": [0.68, 51.0, 0.46, -3.0],
        "lo": [0.52, 15.0, 0.44, -9.0], "hi": [0.83, 96.0, 0.49, 2.0],
        "n_informative": [10, np.nan, 731, np.nan], "n_problems": [100, np.nan, 1319, np.nan],
    })  # fmt: skip
    assert "## The aware tail" not in summary_markdown({})
    text = summary_markdown({"aware/drift.csv": _aware_drift(), "aware/bridge.csv": bridge})
    section = text[text.index("## The aware tail") :]
    assert (
        "  - grpo: +1.56 [+0.25, +2.43], tokens +18.5 [+2.1, +34.8]; sign p 0.062, Wilcoxon p "
        "0.1; take-offs 3 / 0 of 5 (Fisher p 0.083); truncated at most 3.1 % (last window); "
        "closed form / GRPO: SGD 1.00, SNR 1.00\n"
    ) in section
    assert (
        "  - dr_grpo: -0.03 [-0.12, +0.05], tokens +0.1 [-0.4, +0.6]; sign p 1, Wilcoxon p 0.81; "
        "take-offs 0 / 0 of 5 (Fisher p n/a); truncated at most 0.0 % (last window); closed "
        "form / GRPO: SGD 0.00, SNR 0.02\n"
    ) in section
    assert (
        "(math_cot_100): within-group AUC of length for being wrong 0.68 [0.52, 0.83] (10 "
        "informative problems of 100); GRPO's 1/|o| pushes wrong answers by +51 [+15, +96]"
    ) in section
    assert "(gsm8k): within-group AUC of length for being wrong 0.46 [0.44, 0.49] (731 " in section
    assert "[`aware/drift.csv`](aware/drift.csv), [`aware/bridge.csv`](aware/bridge.csv)" in section


def test_two_seeds_print_their_values_not_a_t_interval():
    """Below 3 seeds (analysis.seed_stats.MIN_SEEDS) the length-bias drift and ratio and the
    aware tail's contrast show the seeds' values and why, never a t interval."""
    from grpo_dial.analysis.length_bias import summary as lbs

    rows = [{"arm": arm, "awareness": 1.0, "seed": seed, "step": 0, "measured_drift_wrong": m,
             "predicted_drift_wrong": 2e-3, "measured_drift_correct": 0.0,
             "predicted_drift_correct": 0.0, "tail_wrong": 4.0, "tail_correct": 4.0}
            for arm, values in (("grpo", (2e-3, 4e-3)), ("nostd_sequence", (1e-3, 1e-3)))
            for seed, m in enumerate(values)]  # fmt: skip
    summary = lbs.summarize(pd.DataFrame(rows))
    text = summary_markdown({"length_bias/synthetic/summary.csv": summary})
    why = "(no interval below 3 seeds)"
    # nostd's ratio per seed: 1e-3 / 2e-3 and 1e-3 / 4e-3
    assert (f"| alpha 0, sequence normalizer | 2 seeds: 1.00e-03, 1.00e-03 {why} | 2.00e-03 | "
            f"2 seeds: 0.2500, 0.5000 {why} |") in text  # fmt: skip
    assert f"| GRPO | 2 seeds: 2.00e-03, 4.00e-03 {why} |" in text
    drift = _aware_drift(
        n_seeds=[2, 1, 2, 1], mean=[1.5, -0.03, 12.0, 0.1], lo=np.nan, hi=np.nan,
        min=[1.0, -0.03, 4.0, 0.1], max=[2.0, -0.03, 20.0, 0.1],
    )  # fmt: skip
    text = summary_markdown({"aware/drift.csv": drift})
    assert f"  - grpo: 2 seeds: +1.00, +2.00 {why}, tokens 2 seeds: +4.0, +20.0 {why};" in text
    assert f"  - dr_grpo: 1 seed: -0.03 {why}, tokens 1 seed: +0.1 {why};" in text

"""backends.trl.compare: per-run metrics from hand-made tables, intervals and the rank test."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from grpo_dial.backends.trl.compare import METRICS, compare, markdown, read_runs, run_metrics


def tables(acc0: float, acc1: float, silent: list[float], walls: list[float], total: float):
    steps = pd.DataFrame({"step": [1, 2, 3], "silent_fraction": silent, "wall_seconds": walls})
    evals = pd.DataFrame({
        "step": [0, 0, 0, 3, 3, 3], "mode": ["greedy", "greedy", "sampled"] * 2,
        "difficulty": ["all", "easy", "all"] * 2,
        "accuracy": [acc0, 0.9, 0.8, acc1, 0.1, 0.2],
    })  # fmt: skip
    terms = pd.DataFrame({
        "quantity": ["total", "mix", "within_correct", "within_incorrect", "a0"],
        "kind": ["term"] * 4 + ["stat"], "value": [total, 1.0, total - 3.0, 2.0, 0.25],
    })  # fmt: skip
    return steps, evals, terms


def test_one_runs_metrics_by_hand():
    got = run_metrics(*tables(0.25, 0.5, [0.5, 0.25, 0.0], [3.0, 1.0, 2.5], -4.0))
    assert got == {
        "accuracy": 0.5, "d_accuracy": 0.25, "d_length": -4.0, "mix": 1.0,
        "within_correct": -7.0, "within_incorrect": 2.0, "silent": 0.25, "s_per_step": 2.5,
    }  # fmt: skip


def test_pairs_intervals_and_rank_test_by_hand():
    runs = pd.DataFrame(
        [{"arm": "grpo", "seed": s, **dict.fromkeys(METRICS, v)} for s, v in enumerate([1, 2, 3])]
        + [{"arm": "grpo_trl", "seed": s, **dict.fromkeys(METRICS, v)}
           for s, v in enumerate([4, 5, 9])]
        + [{"arm": "alone", "seed": 0, **dict.fromkeys(METRICS, 0.0)}]
    )  # fmt: skip
    table = compare(runs)
    assert list(table["arm"].unique()) == ["grpo"] and list(table["metric"]) == list(METRICS)
    row = table.iloc[0]
    # own 1 2 3: mean 2, s 1, t_{0.95, 2} = 2.919986 -> half 2.919986 / sqrt 3 = 1.685854
    assert (row["own"], row["seeds"]) == (2.0, 3)
    assert row["own_lo"] == pytest.approx(2 - 1.685854, abs=1e-6)
    assert row["own_hi"] == pytest.approx(2 + 1.685854, abs=1e-6)
    # trl 4 5 9: mean 6, s sqrt(7)
    assert row["trl_hi"] == pytest.approx(6 + 2.919986 * math.sqrt(7) / math.sqrt(3), abs=1e-5)
    # fully separated 3 against 3: the exact two-sided p is 2 / C(6, 3) = 0.1
    assert row["p"] == pytest.approx(0.1)
    assert "| grpo | accuracy | 2 [0.314, 3.69] | 6 [1.54, 10.5] | 3 | 0.1 |" in markdown(table)


def test_read_runs_finds_each_run_with_its_decomposition(tmp_path):
    for arm, seed, acc in (("dapo", 0, 0.5), ("dapo_trl", 1, 0.75), ("dapo", 2, 0.0)):
        steps, evals, terms = tables(0.0, acc, [0.0, 0.0, 0.0], [1.0, 1.0, 1.0], 2.0)
        run = tmp_path / "train" / arm / f"seed{seed}"
        run.mkdir(parents=True)
        steps.to_parquet(run / "steps.parquet")
        evals.to_parquet(run / "evals.parquet")
        if seed < 2:  # seed 2 has no decomposition yet: skipped
            folder = tmp_path / "decompose" / arm / f"seed{seed}"
            folder.mkdir(parents=True)
            terms.to_csv(folder / "terms.csv", index=False)
    runs = read_runs(tmp_path)
    assert list(zip(runs["arm"], runs["seed"], runs["accuracy"], strict=True)) == [
        ("dapo", 0, 0.5), ("dapo_trl", 1, 0.75)
    ]  # fmt: skip
    table = compare(runs)
    assert table["seeds"].eq(1).all() and table["p"].isna().all()
    assert np.isnan(table["own_lo"]).all()  # one seed: no interval

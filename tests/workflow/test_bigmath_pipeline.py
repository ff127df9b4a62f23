"""A Big-Math-schema table through the pipeline's rules gives exactly the formulas of DESIGN 1.2.

The expected numbers are computed here a second, independent way: per-prompt Python loops with
math.comb over the rows of the raw parquet file, not through grpo_dial.core.theory.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from grpo_dial.stages.difficulty import difficulty_analysis
from grpo_dial.stages.passrates import passrates
from grpo_dial.tables import read_table

N_ROLLOUTS = 64


@pytest.fixture(scope="module")
def bigmath(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, np.ndarray]:
    """A parquet file with Big-Math's exact columns; rates are multiples of 1/64, plus bad rows."""
    rng = np.random.default_rng(11)
    k = rng.binomial(N_ROLLOUTS, rng.beta(0.6, 0.5, 400))  # (400,), many 0 and 64
    rates = (k / N_ROLLOUTS).tolist() + [None, float("nan"), -0.1, 1.5]
    table = pa.table(
        {
            "problem": [f"problem {i}" for i in range(len(rates))],
            "answer": ["1"] * len(rates),
            "source": ["cn_k12"] * len(rates),
            "domain": [["Mathematics -> Algebra"]] * len(rates),
            "llama8b_solve_rate": pa.array(rates, type=pa.float64()),
        }
    )
    path = tmp_path_factory.mktemp("bigmath") / "train.parquet"
    pq.write_table(table, path)
    return path, k


@pytest.fixture(scope="module")
def analysed(bigmath, tmp_path_factory) -> dict[str, pd.DataFrame]:
    path, _ = bigmath
    out = tmp_path_factory.mktemp("results")
    table = out / "passrates" / "bigmath.parquet"
    passrates({}, {"table": str(table)}, {"spec": {"kind": "bigmath", "path": str(path)}})
    names = (
        "histogram",
        "mass_shares",
        "silent_fractions",
        "allocation",
        "allocation_bands",
        "summary",
    )
    outputs = {name: str(out / f"{name}.csv") for name in names}
    outputs["recommended_g"] = str(out / "recommended_group_size.parquet")
    params = {
        "group_sizes": [4, 8, 16, 32, 64],
        "fidelity": 0.9,
        "histogram_bins": 20,
        "allocation": {"per_prompt_budget": 8, "signal": "grpo", "g_min": 2, "g_max": 64},
    }
    difficulty_analysis({"table": str(table)}, outputs, params)
    return {name: read_table(path) for name, path in outputs.items()}


def test_bad_rows_are_dropped_and_the_rest_kept(bigmath, analysed):
    _, k = bigmath
    summary = analysed["summary"].set_index("metric")["value"]
    assert summary["n_prompts"] == len(k)  # null, NaN, -0.1 and 1.5 dropped
    assert summary["never_solved_fraction"] == pytest.approx(np.mean(k == 0))
    assert summary["always_solved_fraction"] == pytest.approx(np.mean(k == N_ROLLOUTS))


def test_silent_fractions_equal_the_formulas(bigmath, analysed):
    _, k = bigmath
    silent = analysed["silent_fractions"].set_index(["method", "G"])["silent_fraction"]
    for group_size in (4, 8, 16, 32, 64):
        closed = np.mean([(c / 64) ** group_size + (1 - c / 64) ** group_size for c in k])
        assert silent[("closed_form", group_size)] == pytest.approx(closed, rel=1e-12)
    for group_size in (4, 8, 16):  # G <= n/4
        exact = np.mean(
            [
                (math.comb(int(c), group_size) + math.comb(64 - int(c), group_size))
                / math.comb(64, group_size)
                for c in k
            ]
        )
        assert silent[("subsampled", group_size)] == pytest.approx(exact, rel=1e-12)
    assert ("subsampled", 32) not in silent.index


def test_mass_shares_equal_the_formulas(bigmath, analysed):
    _, k = bigmath
    p = k / N_ROLLOUTS
    shares = analysed["mass_shares"]
    weights = {"grpo": np.sqrt(p * (1 - p)), "dr_grpo": p * (1 - p)}
    bands = {
        "extreme": ((p > 0) & (p < 0.1)) | ((p > 0.9) & (p < 1)),
        "medium": (p >= 0.4) & (p <= 0.6),
    }
    for recipe, weight in weights.items():
        for band, inside in bands.items():
            row = shares[(shares["recipe"] == recipe) & shares["band"].str.startswith(band)]
            assert float(row["share"].iloc[0]) == pytest.approx(
                weight[inside].sum() / weight.sum(), rel=1e-12
            )


def test_the_stage_reads_the_file_the_workflow_hands_it(bigmath, tmp_path):
    """The workflow passes a table's file (a local path, a mirror copy or a download) as the
    job's input `source`, which replaces any path in the spec."""
    path, k = bigmath
    table = tmp_path / "bigmath.parquet"
    spec = {"kind": "bigmath", "path": str(tmp_path / "not-read.parquet")}
    passrates({"source": str(path)}, {"table": str(table)}, {"spec": spec})
    assert sorted(read_table(table)["k"]) == sorted(k)

"""The policy chain through Snakemake on a smoke config: warm start -> pass rates -> two dials ->
analyses, and a change to one arm re-runs only that arm's jobs. The chain runs once per session
(the `smoke_run` fixture of tests/conftest.py); each test reads a part of it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from test_workflow import REPO, planned_jobs

from grpo_dial.core.arm_names import arm_name


def smoke_config(results: Path) -> dict:
    config = yaml.safe_load((REPO / "config" / "smoke.yaml").read_text())
    config["results_dir"] = str(results)
    return config


def snakemake_in(smoke, config: dict, config_path: Path, *args: str) -> subprocess.CompletedProcess:
    """snakemake in the smoke run's working directory (its metadata), with `config` written to
    config_path (outside that directory, which other tests read)."""
    config_path.write_text(yaml.safe_dump(config))
    return subprocess.run(
        [sys.executable, "-m", "snakemake", "--snakefile", str(REPO / "Snakefile"),
         "--directory", str(smoke.workdir), "--configfile", str(config_path), "--cores", "2",
         *args],
        capture_output=True, text=True, timeout=900,
    )  # fmt: skip


@pytest.fixture
def smoke(smoke_run):
    """The session's smoke run (tests/conftest.py), which must have finished cleanly."""
    assert smoke_run.returncode == 0, smoke_run.stderr[-4000:]
    assert smoke_run.config == smoke_config(smoke_run.results)  # the smoke config, unchanged
    return smoke_run


@pytest.mark.workflow
def test_policy_chain_writes_the_base_pass_rates_and_every_arms_run(smoke):
    results, config = smoke.results, smoke.config
    base = results / "policy" / "base"
    assert (base / "config.json").exists() and (base / "tokenizer.json").exists()
    rates = pd.read_parquet(results / "passrates" / "base_policy.parquet")
    assert len(rates) == config["pass_rates"]["pool"]
    assert {"wilson_lo", "wilson_hi"} <= set(rates.columns)
    for dial in config["dials"]:
        run = results / "train" / dial / "seed0"
        steps = pd.read_parquet(run / "steps.parquet")
        assert list(steps["step"]) == list(range(1, config["train"]["steps"] + 1))
        evals = pd.read_parquet(run / "evals.parquet")
        assert {0, config["train"]["steps"]} <= set(evals["step"])
        assert (run / "final" / "config.json").exists()
    assert (results / "difficulty" / "base_policy" / "summary.csv").exists()
    assert (results / "simulate" / "base_policy" / "summary.csv").exists()
    lr = pd.read_csv(results / "train" / "dr_grpo" / "lr_calibration.csv")
    assert np.isfinite(lr["update_norm"].iloc[0]) and lr["update_norm"].iloc[0] >= 0


@pytest.mark.workflow
def test_policy_chain_splits_length_by_correctness_into_figures_and_summary(smoke):
    """Per-run terms, the cross-run summary, figures and summary.md."""
    results, config = smoke.results, smoke.config
    summary = pd.read_csv(results / "decompose" / "summary.csv")
    assert sorted(summary["dial"]) == sorted(config["dials"])
    terms = pd.read_csv(results / "decompose" / "grpo" / "seed0" / "terms.csv").set_index(
        "quantity"
    )
    parts = terms.loc[["mix", "within_correct", "within_incorrect"], "value"].sum()
    assert parts == pytest.approx(terms.loc["total", "value"], abs=1e-9)
    for figure in (
        "length_curves",
        "decomposition",
        "accuracy_length",
        "silent_training",
        "identity_training",
    ):
        assert (results / "figures" / f"{figure}.png").stat().st_size > 10_000, figure
    text = (results / "summary.md").read_text()
    for dial in config["dials"]:  # a row per arm in the RL runs' table, in the docs' words
        assert f"| {arm_name(dial)} | {len(config['train']['seeds'])} |" in text
    assert "## RL runs: accuracy and length by correctness" in text
    assert "## Difficulty of the pass-rate tables" in text and "| base_policy |" in text


@pytest.mark.workflow
def test_policy_chain_compares_adaptive_with_uniform_group_sizes(smoke):
    """Equal samples per step, where they went, the figure."""
    results, config = smoke.results, smoke.config
    alloc = pd.read_parquet(results / "train" / "grpo_adaptive" / "seed0" / "allocation.parquet")
    budget = config["train"]["prompts_per_step"] * config["train"]["group_size"]
    assert alloc.groupby("step")["G"].sum().le(budget).all() and alloc["G"].max() <= 8
    comparison = pd.read_csv(results / "allocation" / "comparison.csv")
    assert set(comparison["adaptive"]) == {"grpo_adaptive"} and set(comparison["uniform"]) == {
        "grpo"
    }
    assert {"final_sampled_accuracy", "samples_to_target", "silent_fraction"} <= set(
        comparison["metric"]
    )
    by_band = pd.read_csv(results / "allocation" / "by_band.csv")
    assert set(by_band["dial"]) == {"grpo", "grpo_adaptive"}
    assert (results / "figures" / "allocation.png").stat().st_size > 10_000
    assert "Adaptive against uniform group sizes" in (results / "summary.md").read_text()


@pytest.mark.workflow
def test_every_cell_of_every_table_of_the_smoke_run_is_one_value(smoke):
    """Every cell of every table is one value: never a printed pandas Series (as duplicate
    seeds would write into decompose/summary.csv, with exit code 0)."""
    tables = [p for p in sorted(smoke.results.rglob("*")) if p.suffix in (".csv", ".parquet")]
    assert len(tables) > 20
    for path in tables:
        table = pd.read_parquet(path) if path.suffix == ".parquet" else pd.read_csv(path)
        for column in table.columns:
            cells = table[column].tolist()
            assert all(pd.api.types.is_scalar(v) for v in cells), (path, column)
            assert not any(isinstance(v, str) and "dtype:" in v for v in cells), (path, column)


@pytest.mark.workflow
def test_the_report_holds_every_figure_and_summary_table_with_its_caption(smoke, tmp_path):
    report = snakemake_in(smoke, smoke.config, tmp_path / "config.yaml", "--report",
                          str(tmp_path / "report.html"))  # fmt: skip
    assert report.returncode == 0, report.stderr[-2000:]
    html = (tmp_path / "report.html").read_text(errors="replace")
    assert "decomposition.png" in html and "split exactly" in html


@pytest.mark.workflow
def test_a_change_to_one_arm_reruns_only_its_jobs_and_what_depends_on_them(smoke, tmp_path):
    config = smoke.config
    config["dials"]["dr_grpo"]["eps"] = 1e-4
    plan = snakemake_in(smoke, config, tmp_path / "config.yaml", "-n")
    assert plan.returncode == 0, plan.stderr[-2000:]
    jobs = planned_jobs(plan.stdout)
    assert jobs.pop("train") == 1 and jobs.pop("decompose_length") == 1, jobs
    assert jobs.pop("calibrate_lr", 0) <= 1, jobs  # only this arm's calibration
    # what depends on every run (the cross-run summary and its figures) follows; nothing else
    cross_run = {"training_summary", "training_figures", "length_pressure", "window_sensitivity"}
    assert set(jobs) <= cross_run | {"length_pressure_figure", "summary", "all"}, jobs
    assert "results/train/dr_grpo/seed0" in plan.stdout.replace(str(smoke.workdir) + "/", "")

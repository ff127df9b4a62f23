"""The aware-tail study's overlay plans every arm's runs, the base policy's sample, the aware
rules and the real-sample bridge; the arithmetic task plans none of the aware rules; the sweep
overlay plans one cell per (optimizer, awareness level, arm)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from conftest import REPO
from test_workflow import planned_jobs, snakemake

AWARE_RULES = ("aware_base", "aware_summary", "aware_figure", "aware_bridge")


def _config(tmp_path: Path, *overlays: str) -> dict:
    config = yaml.safe_load((REPO / "config" / "length_aware.yaml").read_text())
    for name in overlays:
        for key, value in yaml.safe_load((REPO / "config" / name).read_text()).items():
            if isinstance(value, dict) and isinstance(config.get(key), dict):
                config[key] = {**config[key], **value}
            else:
                config[key] = value
    config["dials"] = {k: v for k, v in config["dials"].items() if v is not None}
    config["results_dir"] = str(tmp_path / "results")
    return config


@pytest.mark.parametrize("task", ["aware", "arithmetic"])
def test_overlay_dry_run_plans_the_aware_rules_only_for_the_aware_task(tmp_path: Path, task):
    config = _config(tmp_path)
    if task == "arithmetic":
        config["task"] = {"name": "arithmetic", "options": {}}
        config["warm_start"].pop("style_weights")
    run = snakemake(tmp_path, config, "-n", "--replace-workflow-config")
    assert run.returncode == 0, run.stderr[-2000:]
    jobs = planned_jobs(run.stdout)
    assert jobs["train"] == len(config["dials"]) * len(config["train"]["seeds"]) == 35
    if task == "aware":
        assert [jobs.get(r) for r in AWARE_RULES] == [1, 1, 1, 1]
        assert config["train"]["max_new_tokens"] == 512  # a cap the tail never reaches
    else:
        assert not any(r in jobs for r in AWARE_RULES)


def test_the_sweep_overlay_plans_a_cell_per_optimizer_level_and_arm(tmp_path: Path):
    config = _config(tmp_path, "length_aware_sweep.yaml", "length_aware_sweep_small.yaml")
    assert sorted(config["dials"]) == ["dr_grpo", "dr_grpo_l3", "grpo", "nostd_sequence"]
    run = snakemake(tmp_path, config, "-n", "--replace-workflow-config", "aware_dose_figure")
    assert run.returncode == 0, run.stderr[-2000:]
    jobs = planned_jobs(run.stdout)
    assert jobs["aware_sweep_cell"] == 2 * 5 * 4
    assert jobs["aware_frozen_cell"] == 1  # the tail-frozen control, once (AdamW, a = 0.6)
    assert [jobs.get(r) for r in ("aware_base", "aware_rates", "aware_dose")] == [1, 1, 1]
    assert jobs.get("aware_probe") == 1  # the one-step probe, read by aware_dose
    assert "aware_later_probe" not in jobs  # switched off: 40 steps end before step 40's state
    assert "train" not in jobs  # the sweep trains in its cells, not through rule train


def test_the_sweep_plans_the_later_state_probe_on_its_arms_sgd_cells(tmp_path: Path):
    """The full sweep's overlay plans aware_later_probe once, on the SGD cells of
    aware_sweep.later_probe's arms at every level, and aware_dose reads its table."""
    config = _config(tmp_path, "length_aware_sweep.yaml")
    run = snakemake(tmp_path, config, "-n", "--replace-workflow-config", "aware_dose_figure")
    assert run.returncode == 0, run.stderr[-2000:]
    assert planned_jobs(run.stdout)["aware_later_probe"] == 1
    blocks = run.stdout.split("rule ")
    later = next(b for b in blocks if b.startswith("aware_later_probe:"))
    inputs = next(x for x in later.splitlines() if x.strip().startswith("input:"))
    cells = sorted(x.split("aware_sweep/")[1] for x in inputs.split(", ") if "/sgd/" in x)
    want = sorted(f"sgd/{lev}/{d}.parquet" for lev in ("a0", "a20", "a40", "a60", "a80")
                  for d in ("grpo", "nostd_sequence", "dr_grpo"))  # fmt: skip
    assert cells == want
    dose = next(b for b in blocks if b.startswith("aware_dose:"))
    assert "aware_sweep/later_probe.csv" in dose.split("output:")[0]


def test_the_powered_overlay_plans_one_level_of_adamw_cells(tmp_path: Path):
    config = _config(tmp_path, "length_aware_sweep.yaml", "length_aware_sweep_powered.yaml")
    assert sorted(config["dials"]) == ["dr_grpo", "grpo"] and len(config["train"]["seeds"]) == 120
    run = snakemake(tmp_path, config, "-n", "--replace-workflow-config", "aware_dose_figure")
    assert run.returncode == 0, run.stderr[-2000:]
    jobs = planned_jobs(run.stdout)
    assert jobs["aware_sweep_cell"] == 2  # AdamW x a80 x (GRPO, Dr. GRPO)
    assert jobs["aware_frozen_cell"] == 1  # the control stays at a60
    cells = [x for x in run.stdout.splitlines() if "aware_sweep/adamw/" in x and "output:" in x]
    assert cells and all("/a80/" in x or "tail_frozen" in x for x in cells), cells
    config["aware_sweep"]["levels"] = ["a90"]
    run = snakemake(tmp_path, config, "-n", "--replace-workflow-config", "aware_dose_figure")
    lines = [x for x in (run.stdout + run.stderr).splitlines() if "config error" in x]
    assert run.returncode != 0 and len(lines) == 1, lines
    assert lines[0].startswith("config error at 'aware_sweep.levels.0'"), lines


@pytest.mark.parametrize(
    ("optimizers", "cells", "problem"),
    [
        (["adamw"], {"adamw"}, None),
        (["sgd"], {"sgd"}, None),
        (["adamw", "adamw"], None, "config error at 'aware_sweep.optimizers'"),
        (["adam"], None, "config error at 'aware_sweep.optimizers.0'"),
    ],
)
def test_the_sweeps_optimizers_are_the_configs(tmp_path: Path, optimizers, cells, problem):
    config = _config(tmp_path, "length_aware_sweep.yaml", "length_aware_sweep_small.yaml")
    config["aware_sweep"] |= {"optimizers": optimizers}  # the small overlay's later_probe kept
    run = snakemake(tmp_path, config, "-n", "--replace-workflow-config", "aware_dose_figure")
    if problem:
        lines = [x for x in (run.stdout + run.stderr).splitlines() if "config error" in x]
        assert run.returncode != 0 and len(lines) == 1 and lines[0].startswith(problem), lines
        return
    assert run.returncode == 0, run.stderr[-2000:]
    assert planned_jobs(run.stdout)["aware_sweep_cell"] == 5 * 4  # one optimizer's cells
    planned = {
        p.split("/aware_sweep/")[1].split("/")[0]
        for p in run.stdout.split()
        if "/aware_sweep/" in p and p.endswith(".parquet") and "tail_frozen" not in p
    }
    assert planned == cells


@pytest.mark.parametrize("weights", ["markers", "all", "rows"])
def test_the_sgd_weights_are_checked_by_the_schema(tmp_path: Path, weights):
    config = _config(tmp_path, "length_aware_sweep.yaml", "length_aware_sweep_small.yaml")
    config["aware_sweep"] |= {"optimizers": ["sgd"], "sgd_weights": weights}
    run = snakemake(tmp_path, config, "-n", "--replace-workflow-config", "aware_dose_figure")
    if weights == "rows":
        lines = [x for x in (run.stdout + run.stderr).splitlines() if "config error" in x]
        assert run.returncode != 0 and len(lines) == 1, lines
        assert lines[0].startswith("config error at 'aware_sweep.sgd_weights'"), lines
        return
    assert run.returncode == 0, run.stderr[-2000:]
    assert planned_jobs(run.stdout)["aware_sweep_cell"] == 5 * 4

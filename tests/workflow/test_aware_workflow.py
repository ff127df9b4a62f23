"""The aware-tail study's overlay plans every arm's runs, the aware rules and the math_cot_100
bridge; the arithmetic task plans none of the aware rules."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from conftest import REPO
from test_workflow import planned_jobs, snakemake

AWARE_RULES = ("aware_summary", "aware_figure", "aware_bridge")


@pytest.mark.parametrize("task", ["aware", "arithmetic"])
def test_overlay_dry_run_plans_the_aware_rules_only_for_the_aware_task(tmp_path: Path, task):
    config = yaml.safe_load((REPO / "config" / "length_aware.yaml").read_text())
    config["results_dir"] = str(tmp_path / "results")
    if task == "arithmetic":
        config["task"] = {"name": "arithmetic", "options": {}}
        config["warm_start"].pop("style_weights")
    run = snakemake(tmp_path, config, "-n", "--replace-workflow-config")
    assert run.returncode == 0, run.stderr[-2000:]
    jobs = planned_jobs(run.stdout)
    assert jobs["train"] == len(config["dials"]) * len(config["train"]["seeds"]) == 35
    if task == "aware":
        assert [jobs.get(r) for r in AWARE_RULES] == [1, 1, 1]
    else:
        assert not any(r in jobs for r in AWARE_RULES)

"""The length-bias study's config plans the channel rules for every run, and a task without a
tail plans none of them."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from conftest import REPO
from test_workflow import planned_jobs, snakemake

CHANNEL_RULES = ("channel_base", "channel_run", "channel_summary", "channel_figures")


@pytest.mark.parametrize("tail", [2, 0])
def test_study_dry_run_plans_the_channel_only_with_a_tail(tmp_path: Path, tail: int) -> None:
    config = yaml.safe_load((REPO / "config" / "length_channel.yaml").read_text())
    config["results_dir"] = str(tmp_path / "results")
    config["task"]["options"]["tail_checks"] = tail
    for name in ("math_cot", "gsm8k"):
        config["real_lengths"][name] = None
    run = snakemake(tmp_path, config, "-n", "--replace-workflow-config")
    assert run.returncode == 0, run.stderr[-2000:]
    jobs = planned_jobs(run.stdout)
    runs = len(config["dials"]) * len(config["train"]["seeds"])
    assert jobs["train"] == runs == 15
    if tail:
        assert [jobs.get(r) for r in CHANNEL_RULES] == [1, runs, 1, 1]
    else:
        assert not any(r in jobs for r in CHANNEL_RULES)

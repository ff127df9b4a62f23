"""The pipeline checks: the difficulty analysis timed on a synthetic table, a failing dry run
reported by its last error line, and torch read off the dry run's import times (snakemake is
stubbed: a real dry run parses the whole workflow)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from grpo_dial.tools.bench import pipeline


def _fake_run(returncode: int, stdout: str = "", stderr: str = ""):
    seen = []

    def run(cmd, **kwargs):
        seen.append((cmd, kwargs))
        return subprocess.CompletedProcess(cmd, returncode, stdout, stderr)

    return run, seen


def test_difficulty_analysis_is_timed_on_a_table_of_the_asked_size() -> None:
    out = pipeline.time_difficulty(rows=500)
    assert out["rows"] == 500 and out["difficulty_analysis_s"] > 0


def test_dry_runs_overlay_config_yaml_and_report_the_last_error(monkeypatch) -> None:
    err = "Building DAG of jobs...\nIndexError: not last\nWorkflowError: last\nExiting\n"
    run, seen = _fake_run(1, stderr=err)
    monkeypatch.setattr(pipeline.subprocess, "run", run)
    out = pipeline.time_dry_runs([Path("config/config.yaml"), Path("config/gpu.yaml")])
    assert out == {"config.yaml": "failed: WorkflowError: last", "gpu.yaml": out["config.yaml"]}
    assert seen[0][0][-2:] == ["--configfile", "config/config.yaml"]
    assert seen[1][0][-3:] == ["--configfile", "config/config.yaml", "config/gpu.yaml"]
    run, _ = _fake_run(0)
    monkeypatch.setattr(pipeline.subprocess, "run", run)
    clock = iter([10.0, 12.5, 20.0, 20.25])  # perf_counter around each of the two dry runs
    monkeypatch.setattr(pipeline.time, "perf_counter", lambda: next(clock))
    got = pipeline.time_dry_runs([Path("config/config.yaml"), Path("config/gpu.yaml")])
    assert got == {"config.yaml": 2.5, "gpu.yaml": 0.25}  # the seconds between the two reads


def test_torch_is_read_off_the_import_times(monkeypatch) -> None:
    times = "import time: self [us] | cumulative | imported package\nimport time: 5 | 9 | yaml\n"
    for extra, expected in (("", False), ("import time:  812 | 901234 | torch\n", True)):
        run, seen = _fake_run(0, stderr=times + extra)
        monkeypatch.setattr(pipeline.subprocess, "run", run)
        assert pipeline.torch_at_dag_build() is expected
        assert seen[0][1]["env"]["PYTHONPROFILEIMPORTTIME"] == "1"
    run, _ = _fake_run(0, stderr="nothing")
    monkeypatch.setattr(pipeline.subprocess, "run", run)
    with pytest.raises(ValueError, match="no import times"):
        pipeline.torch_at_dag_build()

"""Bring your own run: a TRL completions directory and a verl rollout directory go through the
workflow to the report, and `grpo-dial diagnose` gives the quick look."""

from __future__ import annotations

import pandas as pd
import pytest
from external_fixtures import write_trl_run, write_verl_run
from test_workflow import REPO, snakemake

from grpo_dial.tools.cli import main


@pytest.mark.slow
@pytest.mark.workflow
def test_trl_and_verl_runs_go_through_the_pipeline_to_the_report(tmp_path):
    trl = write_trl_run(tmp_path / "trl_out")
    verl = write_verl_run(tmp_path / "verl_rollouts")
    results = tmp_path / "results"
    config = {
        "results_dir": str(results),
        "passrate_tables": {"synthetic": {"kind": "synthetic", "n_prompts": 500}},
        "theory": {"identity": {"n_groups": 500}},
        "simulate": {"tables": ["synthetic"], "n_prompts": 100, "steps": 5},
        "dapo_consistency": {"curve": "absent.csv", "optional": True},
        "real_lengths": {"math_cot": None, "gsm8k": None},
        "dials": {},
        "decompose": {"n_boot": 100},
        "runs": {
            "trl_run": {"format": "trl", "path": str(trl)},
            "verl_run": {"format": "verl", "path": str(verl)},
        },
    }
    done = snakemake(tmp_path, config)
    assert done.returncode == 0, done.stderr[-4000:]
    for run in ("trl_run", "verl_run"):
        terms = pd.read_csv(results / "external" / run / "terms.csv").set_index("quantity")
        # the fixtures grow only incorrect responses: the within-incorrect term carries the change
        assert terms.loc["total", "value"] > 0
        assert terms.loc["within_incorrect", "share"] == pytest.approx(1.0, abs=0.35)
        silent = pd.read_csv(results / "external" / run / "silent.csv")
        assert {"all_correct_fraction", "expected_all_correct"} <= set(silent.columns)
        assert (results / "figures" / f"external_{run}.png").exists()
        assert f"Imported run {run}" in (results / "summary.md").read_text()
    report = snakemake(tmp_path, config, "--report", str(tmp_path / "report.html"))
    assert report.returncode == 0, report.stderr[-2000:]
    assert "external_trl_run.png" in (tmp_path / "report.html").read_text(errors="replace")


def test_diagnose_command_prints_the_key_numbers(tmp_path, capsys, monkeypatch):
    run = write_trl_run(tmp_path / "trl_out")
    monkeypatch.chdir(tmp_path)
    assert main(["diagnose", str(run), "--format", "trl", "--n-boot", "50"]) == 0
    out = capsys.readouterr().out
    assert "within" in out and "diagnosis.png" in out and "kept 288" in out
    assert (tmp_path / "grpo-dial-trl_out" / "diagnosis.png").exists()
    assert (tmp_path / "grpo-dial-trl_out" / "terms.csv").exists()


def test_diagnose_never_writes_into_the_run_folder(tmp_path, capsys, monkeypatch):
    run = write_trl_run(tmp_path / "trl_out")
    before = sorted(p.relative_to(run) for p in run.rglob("*"))
    monkeypatch.chdir(tmp_path)
    for _ in range(2):  # the default is a fresh folder each time, under the current directory
        assert main(["diagnose", str(run), "--format", "trl", "--n-boot", "20"]) == 0
    assert (tmp_path / "grpo-dial-trl_out").is_dir() and (tmp_path / "grpo-dial-trl_out-2").is_dir()
    for inside in (run, run / "completions" / "diag"):
        capsys.readouterr()
        argv = ["diagnose", str(run), "--format", "trl", "--out", str(inside)]
        assert main(argv) == 2
        err = capsys.readouterr().err.strip()
        assert "inside the run folder" in err and len(err.splitlines()) == 1
    assert sorted(p.relative_to(run) for p in run.rglob("*")) == before


def test_diagnose_on_a_missing_directory_fails_in_one_line(tmp_path, capsys):
    assert main(["diagnose", str(tmp_path / "nowhere"), "--format", "verl"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("grpo-dial: error:") and len(err.splitlines()) == 1


def test_the_readme_names_the_commands():
    text = (REPO / "README.md").read_text()
    assert "## Diagnose your own GRPO run" in text
    assert "grpo-dial diagnose" in text

"""The workflow: dry runs of the DAG, config validation, and the analysis rules end to end."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml
from conftest import REPO, SHARED_DATA

from grpo_dial.tools.cli import STAGES

SNAKEMAKE = [sys.executable, "-m", "snakemake"]
PAPER_GROUP_SIZES = {
    (p, fidelity): cell
    for p, row in {
        0.50: [(7, 5), (11, 10), (51, 50)],
        0.30: [(9, 6), (14, 12), (61, 60)],
        0.10: [(22, 14), (36, 28), (144, 139)],
        0.05: [(42, 26), (69, 53), (273, 263)],
    }.items()
    for fidelity, cell in zip((0.9, 0.95, 0.99), row, strict=True)
}
ANALYSIS_RULES = set(STAGES)  # every analysis stage is one rule


def tiny_config(results: Path) -> dict:
    """The embedded default shrunk to seconds: small tables, short simulation, few bootstraps."""
    config = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    config["results_dir"] = str(results)
    config["passrate_tables"]["synthetic"]["n_prompts"] = 3000
    for name in ("gsm8k_logged", "math_cot_100"):
        spec = config["passrate_tables"][name]
        spec["path"] = str((REPO / spec["path"]).resolve())
    config["theory"]["identity"]["n_groups"] = 2000
    config["simulate"].update(n_prompts=400, steps=25, tables=["synthetic"])
    config["dials"] = {}  # the analysis half only; the policy chain has its own smoke test
    config["dapo_consistency"].update(
        curve=str((REPO / config["dapo_consistency"]["curve"]).resolve()), n_boot=20
    )
    return config


def snakemake(workdir: Path, config: dict, *args: str) -> subprocess.CompletedProcess:
    config_path = workdir / "config.yaml"
    config_path.write_text(yaml.safe_dump(config))
    return subprocess.run(
        [
            *SNAKEMAKE,
            "--snakefile",
            str(REPO / "Snakefile"),
            "--directory",
            str(workdir),
            "--configfile",
            str(config_path),
            "--cores",
            "2",
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=900,
    )


def planned_jobs(stdout: str) -> dict[str, int]:
    """Rule -> count from the 'Job stats' table of a dry run."""
    lines = stdout.split("Job stats:")[1].splitlines()[3:]
    counts = {}
    for line in lines:
        parts = line.split()
        if len(parts) != 2 or parts[0] == "total":
            break
        counts[parts[0]] = int(parts[1])
    return counts


def test_default_dry_run_lists_every_analysis_job():
    result = subprocess.run(
        [*SNAKEMAKE, "-n", "--forceall", "--cores", "1"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    jobs = planned_jobs(result.stdout)
    assert ANALYSIS_RULES - {"dapo_consistency", "dapo_figure"} <= set(jobs)
    n_tables = 3 if SHARED_DATA.exists() else 1
    assert jobs["passrates"] == n_tables
    # plus the base policy's own table from estimate_pass_rates
    assert jobs["difficulty_analysis"] == n_tables + 1
    assert jobs["difficulty_figure"] == n_tables + 1
    default = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    assert jobs["warm_start"] == 1 and jobs["estimate_pass_rates"] == 1
    assert jobs["train"] == len(default["dials"]) * len(default["train"]["seeds"])
    if SHARED_DATA.exists():
        assert jobs["dapo_consistency"] == 1


@pytest.mark.parametrize(
    ("patch", "fragment"),
    [
        ({"simulate": {"steps": "many"}}, "config error at 'simulate.steps'"),
        ({"simulat": {}}, "'simulat' was unexpected"),
        ({"difficulty": {"allocation": {"signal": "loudest"}}}, "difficulty.allocation.signal"),
        ({"simulate": {"tables": ["missing"]}}, "unknown pass-rate table 'missing'"),
        (
            {"passrate_tables": {"x": {"kind": "math_cot", "path": "/nope.jsonl"}}},
            "input path not found: /nope.jsonl",
        ),
    ],
)
def test_bad_config_fails_before_any_job_with_one_line(tmp_path, patch, fragment):
    config = tiny_config(tmp_path / "results")
    for key, value in patch.items():
        if isinstance(value, dict) and isinstance(config.get(key), dict):
            config[key] = {**config[key], **value}
        else:
            config[key] = value
    result = snakemake(tmp_path, config, "-n")
    assert result.returncode != 0
    output = result.stdout + result.stderr
    assert fragment in output
    assert "Traceback" not in output
    assert not (tmp_path / "results").exists()


def test_missing_optional_inputs_are_skipped_with_a_note(tmp_path):
    config = tiny_config(tmp_path / "results")
    config["passrate_tables"]["gsm8k_logged"]["path"] = str(tmp_path / "absent.jsonl")
    config["dapo_consistency"]["curve"] = str(tmp_path / "absent.csv")
    result = snakemake(tmp_path, config, "-n")
    assert result.returncode == 0, result.stderr
    assert "skipping" in result.stderr and "absent.jsonl" in result.stderr, result.stderr
    jobs = planned_jobs(result.stdout)
    assert "dapo_consistency" not in jobs


@pytest.mark.workflow
def test_analysis_rules_end_to_end(tmp_path, shared_data):
    results = tmp_path / "results"
    result = snakemake(tmp_path, tiny_config(results))
    assert result.returncode == 0, result.stderr[-4000:]

    # the group-size table in results/ equals DESIGN 1.3: exact G (closed form rounded to nearest)
    table = pd.read_csv(results / "theory" / "group_size_table.csv").set_index(["p", "fidelity"])
    for (p, fidelity), (exact, nearest) in PAPER_GROUP_SIZES.items():
        assert table.loc[(p, fidelity), "g_exact"] == exact
        assert table.loc[(p, fidelity), "g_closed_form_nearest"] == nearest

    for name in ("synthetic", "gsm8k_logged", "math_cot_100"):
        summary = pd.read_csv(results / "difficulty" / name / "summary.csv")
        assert len(summary) > 0
        assert (results / "figures" / f"difficulty_{name}.png").stat().st_size > 10_000
    arms = pd.read_csv(results / "simulate" / "synthetic" / "summary.csv")["arm"]
    assert set(arms) == {"grpo", "dr_grpo", "dapo", "dr_grpo_lr_matched"}
    fit = pd.read_csv(results / "dapo" / "fit_summary.csv").set_index("model")
    assert fit.loc["closed_form", "n_params"] == 1
    for figure in (
        "identity",
        "fidelity",
        "difficulty_weight",
        "silent_rate",
        "dapo_fit",
        "simulation_synthetic",
    ):
        assert (results / "figures" / f"{figure}.png").exists()
        assert (results / "figures" / f"{figure}.pdf").exists()
    assert (results / "logs" / "simulate" / "synthetic.log").read_text()

    # a second run has nothing to do: finished results are kept
    again = snakemake(tmp_path, tiny_config(results), "-n")
    assert "Nothing to be done" in again.stdout + again.stderr
    shutil.rmtree(tmp_path / ".snakemake", ignore_errors=True)

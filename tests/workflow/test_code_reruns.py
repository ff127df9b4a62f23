"""Reruns follow code (each rule's `code` param, grpo_dial.stages.fingerprint), end to end on a copy
of the repository: after the theory rules ran, the dry run lists exactly the jobs whose source
changed (and their readers), nothing after an unrelated edit, an edit of the generic rule script
or a moved checkout."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from conftest import REPO

TARGET = "theory_figures"  # the theory rules: tables, identity, group bias, estimators, figures


def _copy(to: Path) -> Path:
    to.mkdir(parents=True)
    for name in ("Snakefile", "workflow", "config", "envs"):
        src = REPO / name
        (shutil.copytree if src.is_dir() else shutil.copy)(src, to / name)
    shutil.copytree(REPO / "src" / "grpo_dial", to / "src" / "grpo_dial",
                    ignore=shutil.ignore_patterns("__pycache__"))  # fmt: skip
    (to / "profiles").symlink_to("workflow/profiles")
    return to


def _run(checkout: Path, work: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "snakemake", "--snakefile", str(checkout / "Snakefile"),
         "--directory", str(work), "--configfile", str(work / "config.yaml"), "--cores", "2",
         *args, TARGET],
        capture_output=True, text=True, timeout=900,
    )  # fmt: skip


def _planned(checkout: Path, work: Path) -> set[str]:
    """The rules a dry run would run (empty: nothing to be done)."""
    done = _run(checkout, work, "-n")
    assert done.returncode == 0, done.stderr[-3000:]
    if "Nothing to be done" in done.stdout + done.stderr:
        return set()
    table = done.stdout.split("Job stats:")[1].split("total")[0]
    return set(re.findall(r"^(\w+)\s+\d+\s*$", table, flags=re.M)) - {"job"}


def _edit(path: Path) -> str:
    text = path.read_text()
    path.write_text(text + "\n# an edit\n")
    return text


@pytest.mark.slow
@pytest.mark.workflow
def test_the_dry_run_follows_the_source_each_job_runs(tmp_path):
    checkout, work = _copy(tmp_path / "checkout"), tmp_path / "work"
    work.mkdir()
    config = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    config.update(results_dir=str(work / "results"), dials={})  # the analysis half alone
    config["simulate"]["tables"] = ["synthetic"]
    config["length_bias"]["tables"] = [t for t in config["length_bias"]["tables"]
                                       if t != "base_policy"]  # fmt: skip
    config["theory"]["identity"]["n_groups"] = 500
    config["theory"]["group_bias"]["n_groups"] = 500
    (work / "config.yaml").write_text(yaml.safe_dump(config))
    ran = _run(checkout, work)
    assert ran.returncode == 0, ran.stderr[-4000:]
    assert _planned(checkout, work) == set()
    package = checkout / "src" / "grpo_dial"

    kept = _edit(package / "figures" / "theory.py")  # a figure module: that figure alone
    assert _planned(checkout, work) == {"theory_figures"}
    (package / "figures" / "theory.py").write_text(kept)
    assert _planned(checkout, work) == set()  # reverted: the recorded source again

    kept = _edit(package / "core" / "advantage.py")  # the estimator: the rules that run it
    planned = _planned(checkout, work)
    assert {"identity_check", "estimator_tables", "theory_figures"} <= planned
    assert "theory_tables" not in planned  # the closed forms' tables run no advantage code
    (package / "core" / "advantage.py").write_text(kept)

    for unrelated in (package / "tools" / "cli.py", checkout / "workflow" / "scripts" / "stage.py"):
        kept = _edit(unrelated)
        assert _planned(checkout, work) == set(), unrelated
        unrelated.write_text(kept)

    moved = tmp_path / "moved" / "checkout"
    moved.parent.mkdir()
    checkout.rename(moved)
    assert _planned(moved, work) == set()

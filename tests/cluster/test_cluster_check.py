"""grpo_dial.tools.cluster_check without a cluster: sinfo parsing, the fit of a request, the status
command without accounting, and threads = cpus_per_task on the resolved DAG of a dry run under the
SLURM profiles on this (small) machine."""

from __future__ import annotations

import os
import subprocess
import sys
from types import SimpleNamespace

import pytest
import yaml
from conftest import REPO

from grpo_dial.tools.cluster_check import (
    Request,
    check_jobs,
    fit_status_command,
    job_request,
    misfit,
    parse_gres,
    parse_sinfo,
)

SINFO = """\
cpu01|cpu*|2|20702|(null)
cpu02|cpu*|16|128000|(null)
gpu01|gpu|32|256000|gpu:a100:4(S:0-1)
gpu02|gpu|64|512000|gpu:h100:8,gpu:2
"""


def test_parse_sinfo_reads_each_node_and_marks_the_default_partition():
    nodes = parse_sinfo(SINFO)
    assert [(n.name, n.partition, n.default, n.cpus, n.mem_mb) for n in nodes] == [
        ("cpu01", "cpu", True, 2, 20702),
        ("cpu02", "cpu", True, 16, 128000),
        ("gpu01", "gpu", False, 32, 256000),
        ("gpu02", "gpu", False, 64, 512000),
    ]
    assert nodes[0].gpus == {} and nodes[2].gpus == {"a100": 4}


@pytest.mark.parametrize(
    ("gres", "gpus"),
    [("(null)", {}), ("gpu:4", {"": 4}), ("gpu:a100:4(S:0-1)", {"a100": 4}),
     ("gpu:h100:8,gpu:2,shard:16", {"h100": 8, "": 2}), ("gpu", {"": 1})],
)  # fmt: skip
def test_parse_gres_counts_gpus_by_type(gres, gpus):
    assert parse_gres(gres) == gpus


def test_job_request_is_what_sbatch_gets():
    # cpus_per_task wins over threads (-c), else threads; gres and gpu_model name the GPU type
    assert job_request("train", {"cpus_per_task": 8, "mem_mb": 64000, "gpu": 1}, 2) == Request(
        "train", 8, 64000, 1, None, None
    )
    assert job_request("t", {"mem_mb_per_cpu": 1000}, 3) == Request("t", 3, 3000, 0, None, None)
    got = job_request("t", {"gres": "gpu:a100:2", "slurm_partition": "gpu"}, 1)
    assert (got.gpus, got.gpu_model, got.partition) == (2, "a100", "gpu")
    assert job_request("t", {"mem_mb": "<TBD>"}, 1).mem_mb is None  # not known yet: not checked


def test_a_request_fits_when_one_node_of_its_partition_holds_all_of_it():
    nodes = parse_sinfo(SINFO)
    assert misfit(Request("a", 16, 128000, 0, None, None), nodes) is None  # cpu02, default
    assert misfit(Request("b", 8, 64000, 1, "a100", "gpu"), nodes) is None
    assert misfit(Request("c", 64, None, 2, None, "gpu"), nodes) is None  # gpu02: 8 + 2 untyped


@pytest.mark.parametrize(
    ("request_", "words"),
    [
        (Request("train", 17, 1000, 0, None, None), ["rule train", "cpus_per_task=17",
                                                     "cpu02 with 16 CPUs", "pend forever"]),
        (Request("train", 2, 200000, 0, None, None), ["mem_mb=200000", "128000 MB"]),
        (Request("train", 1, None, 1, None, None), ["gpu=1", "0 GPUs"]),  # GPUs only in 'gpu'
        (Request("train", 8, 1000, 5, "a100", "gpu"), ["gpu=5 (a100)", "4 a100 GPUs"]),
        (Request("train", 1, None, 0, None, "fast"), ["slurm_partition=fast", "cpu, gpu"]),
    ],
)  # fmt: skip
def test_a_request_no_node_holds_fails_in_one_line_naming_rule_and_request(request_, words):
    problem = misfit(request_, parse_sinfo(SINFO))
    assert problem is not None and "\n" not in problem
    for word in words:
        assert word in problem, (word, problem)


def test_check_jobs_reports_the_first_misfit_once():
    nodes = parse_sinfo("n1|main*|2|4000|(null)\n")
    fits, too_big = Request("a", 2, 4000, 0, None, None), Request("train", 4, 1000, 0, None, None)
    assert check_jobs([fits, fits], nodes) is None
    assert check_jobs([fits, too_big, too_big], nodes).startswith("rule train asks for")


def test_without_accounting_the_status_comes_from_squeue():
    settings = SimpleNamespace(status_command="sacct")
    assert fit_status_command(settings, accounting=True) is None
    assert fit_status_command(settings, accounting=None) is None  # unknown: left alone
    assert settings.status_command == "sacct"
    assert "squeue" in fit_status_command(settings, accounting=False)
    assert settings.status_command == "squeue"
    assert fit_status_command(settings, accounting=False) is None  # already squeue


def dry_run_jobs(*args: str) -> list[tuple[str, int, dict[str, str]]]:
    """(rule, threads, resources) of every job of a dry run from the repository root (so the
    default workflow profile, `cores: all`, is loaded beside --profile, as for a user)."""
    result = subprocess.run(
        [sys.executable, "-m", "snakemake", "-n", "--forceall", *args],
        cwd=REPO, capture_output=True, text=True, timeout=300,
        env={**os.environ, "PYTHONPATH": str(REPO / "src")},
    )  # fmt: skip
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    jobs, rule, threads = [], None, 1
    for line in result.stdout.splitlines():
        line = line.strip()
        if line.startswith(("rule ", "localrule ")) and line.endswith(":"):
            rule, threads = line.split()[1].rstrip(":"), 1
        elif line.startswith("threads:"):
            threads = int(line.split()[1])
        elif line.startswith("resources:") and rule is not None:
            pairs = [p.strip().split("=", 1) for p in line[len("resources:") :].split(",")]
            jobs.append((rule, threads, dict(pairs)))
            rule = None
    return jobs


@pytest.mark.workflow
@pytest.mark.parametrize("profile", ["slurm", "slurm_small"])
def test_threads_equal_cpus_per_task_under_the_slurm_profiles(profile):
    """The issue's case: `cores: all` of the default profile capped train at this machine's cores
    (2 here) inside an 8-CPU allocation. Now every job's threads are its allocation."""
    spec = yaml.safe_load((REPO / "workflow" / "profiles" / profile / "config.yaml").read_text())
    jobs = dry_run_jobs(
        "--configfile", "config/smoke.yaml", "--profile", f"workflow/profiles/{profile}",
        "--config", "results_dir=results/cluster_check_dry",
    )  # fmt: skip
    seen = set()
    for rule, threads, resources in jobs:
        wanted = spec["set-resources"].get(rule, {}).get("cpus_per_task")
        if wanted is not None:
            assert resources["cpus_per_task"] == str(wanted), (rule, resources)
            assert threads == wanted, (rule, threads, wanted)
            seen.add(rule)
        else:  # no cpus_per_task: the plugin asks for the rule's threads (-c threads)
            assert "cpus_per_task" not in resources, (rule, resources)
    assert {"warm_start", "estimate_pass_rates", "calibrate_lr", "train"} <= seen
    if profile == "slurm" and (os.cpu_count() or 1) < 8:  # the case: more CPUs than this machine
        assert dict((rule, threads) for rule, threads, _ in jobs)["train"] == 8


@pytest.mark.workflow
def test_cluster_check_command_names_the_misfit(tmp_path, monkeypatch, capsys):
    from grpo_dial.tools.cli import main

    monkeypatch.chdir(REPO)
    monkeypatch.setenv("PYTHONPATH", str(REPO / "src"))
    sinfo = tmp_path / "sinfo.txt"
    sinfo.write_text("node1|main*|2|20000|(null)\n")  # 2 CPUs, 20 GB, no GPU
    common = ["--configfile", "config/smoke.yaml", "--config",
              f"results_dir={tmp_path / 'results'}", "--sinfo", str(sinfo)]  # fmt: skip
    assert main(["cluster-check", "--profile", "workflow/profiles/slurm_small", *common]) == 0
    assert "each fit a node of 1" in capsys.readouterr().out
    assert main(["cluster-check", "--profile", "workflow/profiles/slurm", *common]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and err.startswith("grpo-dial: error: cluster check: rule ")
    big = ("warm_start", "estimate_pass_rates", "calibrate_lr", "train")
    assert any(f"rule {rule} asks for cpus_per_task=" in err for rule in big), err
    assert "node1 with 2 CPUs, 20000 MB" in err

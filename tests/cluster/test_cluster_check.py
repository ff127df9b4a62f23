"""grpo_dial.tools.cluster_check without a cluster: sinfo parsing, the fit of a request, the
status command chosen from `scontrol show config`, the parsing of a dry run's job blocks, and
threads = cpus_per_task on the resolved DAG of a dry run under the SLURM profiles on this (small)
machine."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import yaml
from conftest import REPO

from grpo_dial.tools.cluster_check import (
    Request,
    check_jobs,
    dry_run_requests,
    job_request,
    misfit,
    parse_gres,
    parse_sinfo,
)
from grpo_dial.tools.cluster_status import (
    SlurmConfig,
    choose_status_command,
    parse_scontrol_config,
    profile_status_settings,
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


SCONTROL = """\
Configuration data as of 2026-12-03T09:40:00
AccountingStorageType   = accounting_storage/slurmdbd
AccountingStoreFlags    = (null)
MinJobAge               = {age}
MessageTimeout          = 10 sec
"""


@pytest.mark.parametrize(
    ("age", "seconds"), [("300 sec", 300), ("45 sec", 45), ("5 min", 300), ("1h", 3600)]
)
def test_parse_scontrol_config_reads_accounting_and_min_job_age_in_seconds(age, seconds):
    assert parse_scontrol_config(SCONTROL.format(age=age)) == SlurmConfig(True, seconds)
    off = SCONTROL.format(age=age).replace("slurmdbd", "none")
    assert parse_scontrol_config(off).accounting is False
    assert parse_scontrol_config("MinJobAgeX = 1\n") == SlurmConfig(None, None)


V28 = (2, 8, 0)  # the installed plugin: sacct's 'CANCELLED by 0' matches no failure state


def choose(age, accounting=True, init=5, requested="squeue", sacct=True, plugin=V28):
    return choose_status_command(SlurmConfig(accounting, age), init, requested, sacct, plugin)


def test_with_accounting_squeue_is_chosen_because_sacct_misses_a_cancel():
    # the default cluster (MinJobAge 300 s): squeue, saying why not sacct; also when the
    # profile asks for sacct (or leaves the plugin's default)
    for requested in ("squeue", "sacct", None):
        got = choose(300, requested=requested)
        assert (got.command, got.fatal) == ("squeue", False)
        assert "\n" not in got.note and got.note.startswith("job status from squeue")
        assert "MinJobAge=300 s" in got.note and "2.8.0" in got.note and "CANCELLED by" in got.note
    # 240 s = the plugin's longest wait (180 s) + 60 s is the least that works; 239 s is not
    assert choose(240).command == "squeue" and choose(239).command == "sacct"
    # init 100 s: the plugin itself falls back to sacct below 3 x 100 s, so 299 s is too low
    assert choose(299, init=100).command == "sacct" and choose(300, init=100).command == "squeue"


def test_a_min_job_age_too_low_for_squeue_means_sacct_and_says_what_to_set():
    for age in (60, None):  # too low, or scontrol shows none (the plugin then falls back)
        got = choose(age)
        assert (got.command, got.fatal) == ("sacct", False) and "\n" not in got.note
        assert "too low for squeue (needs >= 240 s" in got.note
        assert "cancelled job then goes unnoticed" in got.note
        assert got.note.endswith("set MinJobAge=300 in slurm.conf")
    got = choose_status_command(None, 5, "squeue", True, V28)  # scontrol failed
    assert got.command == "sacct" and "scontrol show config failed" in got.note


def test_a_plugin_before_2_4_keeps_sacct_where_the_profile_asks_for_it():
    got = choose(300, requested="sacct", plugin=(2, 3, 1))
    assert got.command == "sacct" and "as the profile asks" in got.note
    assert choose(300, requested="squeue", plugin=(2, 3, 1)).command == "squeue"
    got = choose(60, requested="squeue", plugin=(2, 3, 1))
    assert got.command == "sacct" and "unnoticed" not in got.note


def test_without_accounting_the_status_comes_from_squeue_or_the_run_stops():
    got = choose(300, accounting=False, requested="sacct")
    assert (got.command, got.fatal) == ("squeue", False)
    assert "no accounting (sacct is disabled)" in got.note and "MinJobAge=300 s" in got.note
    # 15 s <= 100 s < 240 s: the plugin keeps squeue, which can lose a job; said, not stopped
    got = choose(100, accounting=False)
    assert (got.command, got.fatal) == ("squeue", False)
    assert "below 240 s" in got.note and got.note.endswith("set MinJobAge=300 in slurm.conf")
    # 10 s < 3 x 5 s: the plugin queries sacct, which fails here: every job lost, so stop
    got = choose(10, accounting=False)
    assert got.fatal and "below 15 s (3 x slurm-init-seconds-before-status-checks)" in got.note
    assert "loses every job" in got.note and "\n" not in got.note
    # no sacct installed at all: the plugin cannot fall back, squeue with the warning
    got = choose(10, accounting=True, sacct=False)
    assert (got.command, got.fatal) == ("squeue", False) and "no sacct" in got.note


@pytest.mark.parametrize(("profile", "init"), [("slurm", 10), ("slurm_small", 5)])
def test_the_shipped_profiles_ask_for_squeue(profile, init):
    assert profile_status_settings(REPO / "workflow" / "profiles" / profile) == (init, "squeue")


DRY_RUN = """\
[Thu Dec  3 09:38:14 2026]
rule train:
    output: results/train/grpo/seed0/steps.parquet
    jobid: 5
    reason: Forced execution
    wildcards: dial=grpo, seed=0
    threads: 8
    resources: tmpdir=/tmp, disk=50 GB, mem_mb=64000, runtime=480, gpu=0, cpus_per_task=8

[Thu Dec  3 09:38:14 2026]
rule summary:
    input: results/train/grpo/seed0/steps.parquet
    output: results/summary.csv
    jobid: 6
    reason: Forced execution
    resources: tmpdir=/tmp, disk=50 GB, mem_mb=8000, runtime=60

[Thu Dec  3 09:38:14 2026]
localrule all:
    input: results/summary.csv
    jobid: 0
    reason: Forced execution
    threads: 3
    resources: tmpdir=/tmp

[Thu Dec  3 09:38:14 2026]
checkpoint split:
    output: results/split
    jobid: 7
    reason: Forced execution
    resources: tmpdir=/tmp, mem_mb=1000
Job stats:
job      count
-----  -------
train        1
"""


def test_dry_run_requests_start_each_job_at_one_thread():
    """summary has no threads line after train's `threads: 8`: it asks for 1 CPU, not 8; the
    local rule is not submitted; a checkpoint is."""
    assert dry_run_requests(DRY_RUN) == [
        Request("train", 8, 64000, 0, None, None),
        Request("summary", 1, 8000, 0, None, None),
        Request("split", 1, 1000, 0, None, None),
    ]


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

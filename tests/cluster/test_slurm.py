"""The SLURM profile on a real cluster (tests/cluster/slurm_up.sh starts a one-node one; CI and
`make test-slurm` do): the smoke config through sbatch, every job COMPLETED and the tables equal
to a local run's; a cancelled `train` job resubmitted by Snakemake's retry and resumed from its
checkpoint to the same tables (with accounting too: the profiles' squeue status sees the cancel
that the executor plugin misses through sacct); a request no node can hold stopped before any
sbatch; a cluster without accounting finishing through squeue. Skipped, with one line, when no
cluster is up.

The job count and wall time of the smoke run are printed and written to
$GRPO_SLURM_STATE/e2e-note.txt (CI prints it).
"""

from __future__ import annotations

import contextlib
import getpass
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
import yaml
from conftest import REPO

from grpo_dial.stages.run import ATTEMPT_MARKER
from grpo_dial.tools.cluster_check import query_sinfo
from grpo_dial.tools.cluster_status import query_slurm_config
from grpo_dial.train.checkpoint import FILENAME

pytestmark = [pytest.mark.slurm, pytest.mark.workflow]

STATE = Path(os.environ.get("GRPO_SLURM_STATE", "/tmp/grpo-dial-slurm"))
SCRIPTS = REPO / "tests" / "cluster"
PROFILE = REPO / "workflow" / "profiles" / "slurm_small"
SKIP_DIRS = {"logs", "benchmarks", "checkpoints"}  # per-run records, not results
TIMING = {"wall_seconds", "seconds"}  # pure timing columns (train steps, warm-start loss)
TRAIN = ("grpo", 0)  # the training job the preemption test cancels
NODE_FAIL_TRAIN = ("dr_grpo", 0)  # the training job whose node the node-failure test takes down
PROFILE_CPUS = {  # cpus_per_task (= threads) by rule under slurm_small
    rule: spec.get("cpus_per_task", 1)
    for rule, spec in yaml.safe_load((PROFILE / "config.yaml").read_text())["set-resources"].items()
}


def _no_cluster() -> str | None:
    if shutil.which("sbatch") is None or shutil.which("scontrol") is None:
        return "no SLURM cluster up (no sbatch; tests/cluster/slurm_up.sh or make test-slurm)"
    ping = subprocess.run(["scontrol", "ping"], capture_output=True, text=True, timeout=30)
    if ping.returncode != 0 or "UP" not in ping.stdout:
        return "no SLURM cluster up (scontrol ping: no controller; tests/cluster/slurm_up.sh)"
    return None


@pytest.fixture(scope="module")
def cluster() -> dict:
    if (reason := _no_cluster()) is not None:
        pytest.skip(reason)
    nodes = query_sinfo()
    assert nodes, "sinfo lists no nodes"
    config = query_slurm_config()
    assert config is not None, "scontrol show config failed"
    return {"nodes": nodes, "accounting": config.accounting, "min_job_age": config.min_job_age}


def status_lines(output: str) -> list[str]:
    """The workflow's one line on the status command (grpo_dial.tools.cluster_check)."""
    return [line for line in output.splitlines() if line.startswith("grpo-dial: job status")]


def default_account() -> str | None:
    out = subprocess.run(
        ["sacctmgr", "-n", "-P", "show", "user", getpass.getuser(), "format=DefaultAccount"],
        capture_output=True, text=True, timeout=30,
    ).stdout.strip()  # fmt: skip
    return out.splitlines()[0] if out else None


def make_profile(where: Path, accounting: bool | None, **set_resources: dict) -> Path:
    """A copy of workflow/profiles/slurm_small with this cluster's account (as a user would edit
    it; without one the plugin guesses, with warnings) and extra set-resources."""
    profile = yaml.safe_load((PROFILE / "config.yaml").read_text())
    if accounting and (account := default_account()):
        profile["default-resources"]["slurm_account"] = account
    for rule, resources in set_resources.items():
        profile["set-resources"].setdefault(rule, {}).update(resources)
    profile["slurm-logdir"] = str(where / "slurm_logs")
    where.mkdir(parents=True, exist_ok=True)
    (where / "config.yaml").write_text(yaml.safe_dump(profile))
    return where


def snakemake(*args: str, timeout: int = 3600, popen: bool = False):
    """snakemake from the repository root (the default workflow profile loads, as for a user)."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    env["PYTHONPATH"] = os.pathsep.join([str(REPO / "src"), env.get("PYTHONPATH", "")])
    command = [sys.executable, "-m", "snakemake", *args]
    if popen:
        return subprocess.Popen(command, cwd=REPO, env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True)  # fmt: skip
    return subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=timeout)  # fmt: skip


def slurm_ids(output: str) -> list[str]:
    """SLURM job ids of every submission in a snakemake log."""
    return re.findall(r"submitted with SLURM jobid (\d+)", output)


def sacct_states(ids: list[str]) -> dict[str, str]:
    out = subprocess.run(
        ["sacct", "-X", "-n", "-P", "-o", "JobID,State", "-j", ",".join(ids)],
        capture_output=True, text=True, timeout=60, check=True,
    ).stdout  # fmt: skip
    return dict(line.split("|")[:2] for line in out.splitlines() if "|" in line)


def tables(results: Path) -> dict[str, pd.DataFrame]:
    """Every csv and parquet table of a run (timing columns dropped), by relative path."""
    found = {}
    for path in sorted(results.rglob("*")):
        relative = path.relative_to(results)
        if relative.parts[0] in SKIP_DIRS or path.suffix not in (".csv", ".parquet"):
            continue
        frame = pd.read_csv(path) if path.suffix == ".csv" else pd.read_parquet(path)
        found[str(relative)] = frame.drop(columns=[c for c in frame.columns if c in TIMING])
    return found


def assert_same_tables(reference: dict, got: dict) -> None:
    assert sorted(got) == sorted(reference)
    for name, frame in reference.items():
        pd.testing.assert_frame_equal(frame, got[name], check_exact=True, obj=name)


def wait_for_squeue_empty(run_id: str, seconds: float = 30) -> list[str]:
    left = []
    for _ in range(int(seconds * 2)):
        out = subprocess.run(["squeue", "-h", "--name", run_id, "-o", "%i %T"],
                             capture_output=True, text=True).stdout  # fmt: skip
        left = [line for line in out.splitlines() if line.strip() and "COMPLETED" not in line]
        if not left:
            break
        time.sleep(0.5)
    return left


@pytest.fixture(scope="module")
def smoke_runs(cluster, tmp_path_factory) -> dict:
    """The smoke config once locally and once through sbatch (the slurm_small profile), both from
    the repository root as a user runs it (config/smoke.yaml on the default). Not the session's
    smoke_run: that one runs under --directory, where config/config.yaml is not merged in, and
    the executor's jobs re-read the workflow's own config (--replace-workflow-config does not
    reach them), so the sbatch run cannot read smoke.yaml alone."""
    root = tmp_path_factory.mktemp("slurm_smoke")
    cores = PROFILE_CPUS["warm_start"]  # the local run's threads match the allocations
    local = snakemake("--configfile", "config/smoke.yaml", "--cores", str(cores),
                      "--config", f"results_dir={root / 'local'}")  # fmt: skip
    assert local.returncode == 0, local.stderr[-4000:]
    profile = make_profile(root / "profile", cluster["accounting"])
    start = time.perf_counter()
    run = snakemake("--configfile", "config/smoke.yaml", "--profile", str(profile),
                    "--config", f"results_dir={root / 'slurm'}")  # fmt: skip
    seconds = time.perf_counter() - start
    output = run.stdout + run.stderr
    assert run.returncode == 0, output[-6000:]
    ids = slurm_ids(output)
    status = status_lines(output)
    note = (
        f"smoke config through sbatch: {len(ids)} jobs in {seconds // 60:.0f} min "
        f"{seconds % 60:.0f} s ({status[0] if status else 'no status line'}; "
        f"accounting {'on' if cluster['accounting'] else 'off'})"
    )
    print(note)
    try:
        (STATE / "e2e-note.txt").write_text(note + "\n")
    except OSError:
        pass
    return {"root": root, "output": output, "ids": ids, "profile": profile,
            "local": root / "local"}  # fmt: skip


def test_smoke_config_through_sbatch_every_job_completes_with_the_local_tables(cluster, smoke_runs):
    output, ids = smoke_runs["output"], smoke_runs["ids"]
    planned = int(re.search(r"^total\s+(\d+)", output, re.MULTILINE).group(1))
    local_rules = len(re.findall(r"^localrule ", output, re.MULTILINE))
    assert len(ids) == planned - local_rules > 0  # one sbatch per job, no retry
    assert "pend forever" not in output and "could not check status" not in output
    # the test cluster's MinJobAge (300 s) suits squeue: chosen and said in one line, and the
    # plugin does not fall back to sacct
    assert len(status_lines(output)) == 1 and status_lines(output)[0].startswith(
        "grpo-dial: job status from squeue"
    ), output[-3000:]
    assert "Falling back to 'sacct'" not in output
    if cluster["accounting"]:
        states = sacct_states(ids)
        assert sorted(states) == sorted(ids) and set(states.values()) == {"COMPLETED"}, states
        assert "trying to guess" not in output  # the account is given, as docs/cluster.md says
    else:  # gone from squeue (COMPLETED at most) with every output present: snakemake checked
        run_id = re.search(r"SLURM run ID: (\S+)", output).group(1)
        assert wait_for_squeue_empty(run_id) == []
    root = smoke_runs["root"]
    assert_same_tables(tables(smoke_runs["local"]), tables(root / "slurm"))


def freeze_at_first_checkpoint(proc, ckpt: Path, dial: str, seed: int) -> tuple[str, str] | None:
    """Wait for the running SLURM job of `train` (dial, seed) to write its first checkpoint and
    freeze it there at once (SIGSTOP to each of its processes: steps are ~0.5 s apart in the
    smoke config, faster than a query could catch); SLURM's SIGCONT, SIGTERM and SIGKILL end it.
    Returns (job id, node), or None when Snakemake ended or 30 minutes passed first."""
    found, pids, polled, deadline = None, [], 0.0, time.time() + 1800
    while proc.poll() is None and time.time() < deadline:
        # the job and its processes, until the training script is among them (the queries are
        # slow on a loaded machine; the file check below must not wait on them)
        if not any(stage_script(pid) for pid in pids) and time.time() - polled > 0.2:
            polled = time.time()
            if (found := running_train_job(dial, seed)) is not None:
                pids = job_pids(found[0])
        if found is not None and pids and (ckpt / FILENAME).exists():
            for pid in pids:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGSTOP)
            for pid in set(job_pids(found[0])) - set(pids):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGSTOP)
            return found
        time.sleep(0.002)
    return None


def cancel_and_resume(results: Path, profile: Path, accounting: bool | None, local: Path) -> str:
    """Rerun the finished `train` job TRAIN of a run through sbatch, freeze it at its first
    checkpoint and scancel it, and check that the retry resumed it, before its last step, to the
    same tables and weights (and the same tables as the local run under `local`), leaving no
    Snakemake of either job. Returns a one-line note."""
    dial, seed = TRAIN
    run_dir = results / "train" / dial / f"seed{seed}"
    start = time.perf_counter()
    reference, weights, log, ckpt, proc = rerun_train(results, profile, dial, seed)
    frozen = freeze_at_first_checkpoint(proc, ckpt, dial, seed)
    cancelled = None if frozen is None else frozen[0]
    if cancelled is not None:
        subprocess.run(["scancel", cancelled], check=True)
    output, _ = proc.communicate(timeout=1800)
    seconds = time.perf_counter() - start
    assert cancelled is not None, "train finished before a checkpoint was seen\n" + output[-3000:]
    assert proc.returncode == 0, output[-6000:]
    assert any(line.startswith("grpo-dial: job status from squeue") for line in
               output.splitlines()), output[-3000:]  # fmt: skip
    ids = slurm_ids(output)
    assert len(ids) == 2 and ids[0] == cancelled, (ids, cancelled)  # the job, then its retry
    states = sacct_states(ids) if accounting else {}
    if accounting:
        assert states[ids[0]].startswith("CANCELLED") and states[ids[1]] == "COMPLETED", states
    text = log.read_text()
    assert text.count(ATTEMPT_MARKER) == 2, text[-3000:]
    resumed = re.search(r"resuming from .* after step (\d+) of (\d+)", text)
    assert resumed and 1 <= int(resumed.group(1)) < int(resumed.group(2)), text[-3000:]
    assert_same_tables(reference, tables(run_dir))
    assert_same_tables(tables(local / "train" / dial / f"seed{seed}"), tables(run_dir))
    assert (run_dir / "final" / "model.safetensors").read_bytes() == weights
    # no Snakemake of either job left behind (the profiles' precommand)
    assert wait_for_gone(f"train:dial={dial},seed={seed}") == {}
    return (
        f"train {dial} seed {seed}: SLURM job {ids[0]} cancelled after its checkpoint "
        f"({states.get(ids[0], 'cancelled')}), retry {ids[1]} ({states.get(ids[1], 'done')}) "
        f"resumed after step {resumed.group(1)} of {resumed.group(2)}; "
        f"{len(reference)} tables and the weights identical; {seconds:.0f} s"
    )


def test_a_cancelled_train_job_is_resubmitted_and_resumes_from_its_checkpoint(cluster, smoke_runs):
    """scancel of the running `train` job after its first checkpoint: Snakemake's retry
    (retries: 1) resubmits it, it resumes there, and its tables and weights equal the
    uninterrupted run's. With accounting too: sacct reports the job 'CANCELLED by <uid>', which
    the executor plugin (2.4.0 on) reads as running, but the profile's squeue status says
    'CANCELLED' (docs/cluster.md)."""
    root = smoke_runs["root"]
    note = cancel_and_resume(root / "slurm", smoke_runs["profile"], cluster["accounting"],
                             smoke_runs["local"])  # fmt: skip
    print(note)


def job_steps_left(marker: str) -> dict[int, int]:
    """Snakemake processes of a SLURM job (`--mode remote`: the batch step's and the srun step's)
    whose command line names `marker`: {pid: parent pid}."""
    left = {}
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            args = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            ppid = int((proc / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue  # ended meanwhile
        if "-m snakemake" in args and "--mode remote" in args and marker in args:
            left[int(proc.name)] = ppid
    return left


def wait_for_gone(marker: str, pids=None, seconds: float = 30) -> dict[int, int]:
    """The processes of job_steps_left(marker) (those among `pids`, if given) still there after
    up to `seconds`."""
    for _ in range(int(seconds * 2) + 1):
        left = {k: v for k, v in job_steps_left(marker).items() if pids is None or k in pids}
        if not left:
            break
        time.sleep(0.5)
    return left


def rerun_train(results: Path, profile: Path, dial: str, seed: int) -> tuple:
    """Remove the finished `train` job (dial, seed) of a run, as if never run, and start it again
    through sbatch. Returns (its tables, its final weights, its log, its checkpoint, the Popen)."""
    run_dir = results / "train" / dial / f"seed{seed}"
    ckpt = results / "checkpoints" / dial / f"seed{seed}"
    log = results / "logs" / "train" / dial / f"seed{seed}.log"
    reference = tables(run_dir)
    weights = (run_dir / "final" / "model.safetensors").read_bytes()
    shutil.rmtree(run_dir)
    shutil.rmtree(ckpt, ignore_errors=True)
    log.unlink()
    proc = snakemake(str(run_dir / "steps.parquet"), "--profile", str(profile),
                     "--configfile", "config/smoke.yaml", "--config", f"results_dir={results}",
                     popen=True)  # targets first: --config takes every word after it  # fmt: skip
    return reference, weights, log, ckpt, proc


def running_train_job(dial: str, seed: int) -> tuple[str, str] | None:
    """(job id, node) of the running SLURM job of `train` (dial, seed), if any."""
    out = subprocess.run(["squeue", "-h", "-t", "RUNNING", "-o", "%i|%k|%N"],
                         capture_output=True, text=True).stdout  # fmt: skip
    for line in out.splitlines():
        job, comment, node = line.split("|")
        if comment == f"rule_train_wildcards_{dial}_{seed}":  # the plugin's --comment
            return job, node
    return None


def job_pids(job: str) -> list[int]:
    """The pids of a running job's processes on this node (`scontrol listpids`)."""
    out = subprocess.run(["scontrol", "listpids", job], capture_output=True, text=True).stdout
    return [int(f[0]) for f in map(str.split, out.splitlines()) if f and f[0].isdigit()]


def stage_script(pid: int) -> bool:
    """Whether process `pid` runs a rule's script (Snakemake's .snakemake/scripts/*.stage.py)."""
    try:
        return b".stage.py" in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False


def node_state(node: str) -> str:
    return subprocess.run(["sinfo", "-h", "-n", node, "-o", "%T"], capture_output=True,
                          text=True).stdout.strip()  # fmt: skip


def fail_node_and_resume(results: Path, profile: Path, accounting: bool | None,
                         local: Path) -> str:  # fmt: skip
    """Rerun the finished `train` job NODE_FAIL_TRAIN through sbatch; at its first checkpoint
    freeze its processes (SIGSTOP, as on a dead node) and take its node down (`scontrol update
    state=down`): SLURM requeues it under the same id (Snakemake sees no failure and submits
    nothing more), the job's second run resumes from the checkpoint, before the last step, to
    the same tables and weights (and the local run's tables), and no Snakemake of the job is left
    behind (the profiles' precommand). Returns a one-line note."""
    dial, seed = NODE_FAIL_TRAIN
    run_dir = results / "train" / dial / f"seed{seed}"
    marker = f"train:dial={dial},seed={seed}"  # in its job steps' --target-jobs
    start = time.perf_counter()
    reference, weights, log, ckpt, proc = rerun_train(results, profile, dial, seed)
    failed, node = None, None
    try:
        if (frozen := freeze_at_first_checkpoint(proc, ckpt, dial, seed)) is not None:
            failed, node = frozen
            first_run = job_steps_left(marker)  # the batch step's and the srun step's
            subprocess.run(["scontrol", "update", f"nodename={node}", "state=down",
                            "reason=grpo-dial node failure test"], check=True)  # fmt: skip
            down_at = time.perf_counter()
        assert failed is not None, "train finished before a checkpoint was seen"
        # the test cluster's slurmd answers at once, so ReturnToService=2 may have brought the
        # node back already; a real one comes back when an admin resumes it
        for _ in range(60):
            if node_state(node) in ("idle", "mixed", "allocated", "completing"):
                break
            subprocess.run(["scontrol", "update", f"nodename={node}", "state=resume"],
                           capture_output=True)  # fmt: skip
            time.sleep(0.5)
        first_left = wait_for_gone(marker, first_run, 60)
        gone_seconds = time.perf_counter() - down_at
        output, _ = proc.communicate(timeout=1800)
    finally:
        if proc.poll() is None:
            proc.kill()
        if node is not None and node_state(node).startswith("down"):
            subprocess.run(["scontrol", "update", f"nodename={node}", "state=resume"])
    seconds = time.perf_counter() - start
    assert proc.returncode == 0, output[-6000:]
    ids = slurm_ids(output)
    assert ids == [failed], (ids, failed)  # requeued under its id: no second submission
    shown = subprocess.run(["scontrol", "show", "job", failed], capture_output=True,
                           text=True).stdout  # fmt: skip
    assert "JobState=COMPLETED" in shown and "Restarts=1" in shown, shown
    history = []
    if accounting:  # every run of the job: the node failure, then the completed rerun
        out = subprocess.run(["sacct", "-D", "-X", "-n", "-P", "-o", "State", "-j", failed],
                             capture_output=True, text=True, timeout=60).stdout  # fmt: skip
        history = out.split()
        assert history == ["NODE_FAIL", "COMPLETED"], history
    text = log.read_text()
    assert text.count(ATTEMPT_MARKER) == 2, text[-3000:]
    resumed = re.search(r"resuming from .* after step (\d+) of (\d+)", text)
    assert resumed and 1 <= int(resumed.group(1)) < int(resumed.group(2)), text[-3000:]
    assert len(first_run) >= 2  # seen: the batch step's Snakemake and the srun step's
    assert first_left == {}, f"the first run's job steps outlived it (pid: parent): {first_left}"
    assert wait_for_gone(marker) == {}  # nor the second run's
    assert_same_tables(reference, tables(run_dir))
    assert_same_tables(tables(local / "train" / dial / f"seed{seed}"), tables(run_dir))
    assert (run_dir / "final" / "model.safetensors").read_bytes() == weights
    return (
        f"train {dial} seed {seed}: node {node} taken down after the checkpoint; SLURM job "
        f"{failed} requeued ({' then '.join(history) or 'Restarts=1'}), the first run's job "
        f"steps gone {gone_seconds:.0f} s after; resumed after step {resumed.group(1)} of "
        f"{resumed.group(2)}; {len(reference)} tables and the weights identical; {seconds:.0f} s"
    )


def test_a_node_failure_requeues_the_train_job_which_resumes_leaving_no_process(
    cluster, smoke_runs
):
    """A node taken down under the running `train` job (after its first checkpoint): SLURM
    requeues it under the same id, Snakemake waits on (one submission, no failure seen), the
    job's second run resumes from the checkpoint, tables and weights equal the uninterrupted
    run's, and the first run's job-step Snakemake ends with it (no orphan: the profiles'
    precommand, docs/cluster.md#faults)."""
    root = smoke_runs["root"]
    note = fail_node_and_resume(root / "slurm", smoke_runs["profile"], cluster["accounting"],
                                smoke_runs["local"])  # fmt: skip
    print(note)


def test_a_request_no_node_can_hold_stops_before_any_submission(cluster, tmp_path):
    too_many = max(node.cpus for node in cluster["nodes"]) + 1
    profile = make_profile(tmp_path / "profile", cluster["accounting"],
                           train={"cpus_per_task": too_many})  # fmt: skip
    run = snakemake("--configfile", "config/smoke.yaml", "--profile", str(profile),
                    "--config", f"results_dir={tmp_path / 'results'}", timeout=600)  # fmt: skip
    output = run.stdout + run.stderr
    assert run.returncode != 0
    lines = [line for line in output.splitlines() if "cluster check: " in line]
    assert lines and f"rule train asks for cpus_per_task={too_many}" in lines[0], output[-3000:]
    assert "pend forever" in lines[0]
    assert slurm_ids(output) == []  # nothing was submitted


def test_without_accounting_the_run_finishes_through_squeue(cluster, tmp_path):
    """The issue's hang: sacct exists but accounting is off. Restarts the test cluster without
    slurmdbd (when this session's slurm_up.sh started it), runs one job, restores it."""
    if not (STATE / "slurmctld.pid").exists() or os.geteuid() != 0:
        pytest.skip("the cluster was not started by tests/cluster/slurm_up.sh; mode not switched")
    mode = "accounting" if cluster["accounting"] else "noaccounting"
    switch = subprocess.run([str(SCRIPTS / "slurm_up.sh"), "noaccounting"], capture_output=True,
                            text=True, timeout=300)  # fmt: skip
    assert switch.returncode == 0, switch.stderr
    try:
        profile = make_profile(tmp_path / "profile", accounting=False)
        target = tmp_path / "results" / "passrates" / "synthetic.parquet"
        run = snakemake(str(target), "--configfile", "config/smoke.yaml", "--profile", str(profile),
                        "--config", f"results_dir={tmp_path / 'results'}", timeout=600)  # fmt: skip
        output = run.stdout + run.stderr
        assert run.returncode == 0, output[-4000:]
        assert [line for line in status_lines(output) if "no accounting" in line], output[-3000:]
        assert len(slurm_ids(output)) == 1 and target.exists()
    finally:
        subprocess.run([str(SCRIPTS / "slurm_up.sh"), mode], capture_output=True, timeout=300)


def test_cluster_check_on_the_cluster_says_which_status_command_and_why(cluster, tmp_path):
    """`grpo-dial cluster-check` on the login node: the fit line, then the status line that the
    run would print (squeue: the test cluster's MinJobAge is 300 s, at least 240 s)."""
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    run = subprocess.run(
        [sys.executable, "-m", "grpo_dial.tools.cli", "cluster-check", "--profile",
         str(PROFILE), "--configfile", "config/smoke.yaml", "--config",
         f"results_dir={tmp_path / 'results'}"],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-3000:]
    lines = run.stdout.strip().splitlines()
    assert len(lines) == 2 and "each fit a node of" in lines[0], run.stdout
    assert cluster["min_job_age"] == 300
    assert lines[1].startswith("cluster check: job status from squeue") and "300 s" in lines[1]
    if cluster["accounting"]:
        assert "'CANCELLED by <uid>' as running" in lines[1], lines[1]
    else:
        assert "no accounting (sacct is disabled)" in lines[1], lines[1]

"""One TRL run as one SLURM job of 2 tasks equals the same run in one local process.

tests/cluster/trl_tasks.sbatch through `sbatch --wait` (`--ntasks=2`): srun starts two tasks,
each one machine of the multi-node accelerate launch (`--num_machines 2 --machine_rank
$SLURM_PROCID --main_process_ip 127.0.0.1`), so each task is one gloo process on the CPU. Both
run tests/backends/trl_processes.py (one optimizer step of the translated DAPO dial on fixed
completions, SGD); plain `python` runs it alone meanwhile. The job COMPLETED with 2 tasks of
one job id; each rank records its SLURM job and task (SLURM_PROCID), its node rank (torchrun's
GROUP_RANK) and process rank, and task r ran exactly rank r on node rank r. Its step is the
local one's, both ranks informative: each rank's loss and own gradient non-zero, DDP's gradient
the mean of the ranks' own, the global token count, DAPO's normalizer, the mean loss and the
update to float tolerance (trl_processes.assert_same_step). Skipped, with one line, when no
cluster is up."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from _rl_fixtures import save_tiny
from conftest import REPO
from test_slurm import _no_cluster

pytestmark = [pytest.mark.slurm]
pytest.importorskip("trl")
SBATCH = REPO / "tests" / "cluster" / "trl_tasks.sbatch"
SCRIPT = REPO / "tests" / "backends" / "trl_processes.py"


def _processes_module():
    spec = importlib.util.spec_from_file_location("trl_processes", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_two_task_slurm_job_takes_the_local_one_process_step(tmp_path):
    if (reason := _no_cluster()) is not None:
        pytest.skip(reason)
    save_tiny(tmp_path / "base")
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=f"{REPO / 'src'}{os.pathsep}"
               + os.environ.get("PYTHONPATH", ""))  # fmt: skip
    job_dir = tmp_path / "job"
    job_dir.mkdir()
    with socket.socket() as s:  # a free port for the rendezvous
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    accelerate = shutil.which("accelerate", path=str(Path(sys.executable).parent))
    job = subprocess.Popen(
        ["sbatch", "--wait", "--parsable", "-o", str(job_dir / "job.log"), str(SBATCH),
         accelerate, "127.0.0.1", str(port), str(SCRIPT), str(tmp_path / "base"), str(job_dir),
         "dapo"],
        env=dict(env, GRPO_TASKS_DIR=str(job_dir)), stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    local = subprocess.run(
        [sys.executable, str(SCRIPT), str(tmp_path / "base"), str(tmp_path / "one"), "dapo"],
        env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert local.returncode == 0, local.stderr[-3000:]
    try:
        out, _ = job.communicate(timeout=600)
    finally:
        if job.poll() is None:
            job.kill()
    log = (job_dir / "job.log").read_text() if (job_dir / "job.log").exists() else ""
    assert job.returncode == 0, log[-3000:]
    job_id = out.strip().split(";")[0]
    tasks = sorted((job_dir / f"task{r}.txt").read_text().split()[:3] for r in range(2))
    assert tasks == [[job_id, "0", "2"], [job_id, "1", "2"]]  # one job, two tasks
    # where each rank ran: SLURM task r ran node (machine) rank r and process rank r, and only
    # it; a task that exits at once, leaving the other to launch both ranks, fails here
    ranks = [json.loads((job_dir / f"rank{r}.json").read_text()) for r in range(2)]
    ran = [(r["slurm_job"], r["slurm_task"], r["node_rank"], r["rank"]) for r in ranks]
    assert ran == [(job_id, "0", "0", 0), (job_id, "1", "1", 1)], ran
    state = subprocess.run(["squeue", "-h", "-j", job_id, "-t", "all", "-o", "%T"],
                           capture_output=True, text=True, timeout=30).stdout.split()  # fmt: skip
    assert state in ([], ["COMPLETED"])  # gone from squeue, or shown as completed
    _processes_module().assert_same_step(tmp_path / "one", job_dir, 2)

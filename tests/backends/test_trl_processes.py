"""One trl-backend run across two processes equals one process at the same global batch.

`accelerate launch --multi_gpu --num_processes 2` on the CPU (TRL's use_cpu: torch.distributed
over gloo, no GPU) against plain `python`, both running tests/backends/trl_processes.py: one
optimizer step of the translated DAPO dial (grpo_config_kwargs with processes = WORLD_SIZE), the
same 16 completions (a fixed function of the prompt, not sampled), SGD so the update is lr x the
gradient. Equal: the global token count `num_items_in_batch`, DAPO's normalizer (each process
divides its token sum by num_items_in_batch / 2 and DDP averages: the token mean over the
whole batch), the mean loss and the first update to float tolerance."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from _rl_fixtures import save_tiny
from trl_processes import assert_same_step

pytest.importorskip("trl")
SCRIPT = Path(__file__).with_name("trl_processes.py")
SRC = Path(__file__).parents[2] / "src"


def launch(base: Path, out: Path, processes: int) -> list[dict]:
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=f"{SRC}{os.pathsep}"
               + os.environ.get("PYTHONPATH", ""))  # fmt: skip
    cmd = [sys.executable, str(SCRIPT), str(base), str(out), "dapo"]
    if processes > 1:
        with socket.socket() as s:  # a free port for the rendezvous
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        accelerate = shutil.which("accelerate", path=str(Path(sys.executable).parent))
        cmd = [accelerate, "launch", "--multi_gpu", "--num_processes", str(processes),
               "--num_machines", "1", "--mixed_precision", "no", "--dynamo_backend", "no",
               "--main_process_port", str(port), *cmd[1:]]  # fmt: skip
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return [json.loads((out / f"rank{r}.json").read_text()) for r in range(processes)]


@pytest.mark.processes
def test_two_gloo_processes_give_one_process_first_update_and_dapo_normalizer(tmp_path):
    save_tiny(tmp_path / "base")
    (one,) = launch(tmp_path / "base", tmp_path / "one", 1)
    assert one["steps"][0]["rows"] == 16  # one process: 16 rows in one micro-batch, one step
    launch(tmp_path / "base", tmp_path / "two", 2)
    assert_same_step(tmp_path / "one", tmp_path / "two", 2)

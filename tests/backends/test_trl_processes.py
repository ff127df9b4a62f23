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
import torch
from _rl_fixtures import save_tiny

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
    two = launch(tmp_path / "base", tmp_path / "two", 2)
    assert [r["processes"] for r in two] == [2, 2] and {r["backend"] for r in two} == {"gloo"}
    (single,) = one["steps"]  # one process: 16 rows in one micro-batch, one optimizer step
    halves = [r["steps"][0] for r in two]
    assert single["rows"] == 16 and [h["rows"] for h in halves] == [8, 8]
    # the global token count, seen by both processes; their tokens split it
    tokens = single["tokens"]
    assert single["num_items_in_batch"] == tokens > 0
    assert [h["num_items_in_batch"] for h in halves] == [tokens, tokens]
    assert sum(h["tokens"] for h in halves) == tokens
    # DAPO's normalizer: process r's loss is its token sum / (tokens / 2); their mean (DDP's
    # gradient average) is the token sum of the batch / tokens, the one process's loss
    assert sum(h["loss"] for h in halves) / 2 == pytest.approx(single["loss"], abs=1e-6)
    assert abs(single["loss"]) > 1e-3  # a batch with a gradient to compare
    a = torch.load(tmp_path / "one" / "update.pt")
    b = torch.load(tmp_path / "two" / "update.pt")
    assert a.keys() == b.keys()
    size = max(float(v.abs().max()) for v in a.values())
    assert size > 1e-3
    for name in a:
        torch.testing.assert_close(b[name], a[name], atol=1e-6, rtol=1e-4, msg=name)

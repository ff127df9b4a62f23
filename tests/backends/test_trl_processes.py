"""One trl-backend run across two processes equals one process at the same global batch.

`accelerate launch --multi_gpu --num_processes 2` on the CPU (TRL's use_cpu: torch.distributed
over gloo, no GPU) against plain `python`, both running tests/backends/trl_processes.py: one
optimizer step of the translated DAPO dial (grpo_config_kwargs with processes = WORLD_SIZE), the
same 16 completions (a fixed function of the prompt, not sampled; every group mixed, so both
ranks' shares are informative), SGD so the update is lr x the gradient. Each rank's loss and
own gradient are non-zero (a silent rank fails here); the gradient DDP stepped on is the mean
of the ranks' own gradients and the one process's. Equal: the global token count
`num_items_in_batch`, DAPO's normalizer (each process divides its token sum by
num_items_in_batch / 2 and DDP averages: the token mean over the whole batch), the mean loss
and the first update to float tolerance.

Second case, `accelerate launch --use_fsdp --fsdp_version 2`: accelerate 1.16 has no FSDP on the
CPU (docs/backends.md). A CPU rank gets DistributedType.MULTI_CPU (accelerate/state.py:769) and
only the MULTI_<accelerator> types are promoted to FSDP (state.py:947-977), so the plugin is
dropped without a word and the run is the DDP one: the same step, the model wrapped in
DistributedDataParallel, not sharded. When a later accelerate shards on the CPU this case fails on
the wrapper and should become a real FSDP case."""

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


MODES = {  # accelerate launch's flag(s) for a multi-process CPU run
    "ddp": ["--multi_gpu"],
    "fsdp": ["--use_fsdp", "--fsdp_version", "2"],
}


def launch(base: Path, out: Path, processes: int, mode: str = "ddp") -> list[dict]:
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=f"{SRC}{os.pathsep}"
               + os.environ.get("PYTHONPATH", ""))  # fmt: skip
    cmd = [sys.executable, str(SCRIPT), str(base), str(out), "dapo"]
    if processes > 1:
        with socket.socket() as s:  # a free port for the rendezvous
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        accelerate = shutil.which("accelerate", path=str(Path(sys.executable).parent))
        cmd = [accelerate, "launch", *MODES[mode], "--num_processes", str(processes),
               "--num_machines", "1", "--mixed_precision", "no", "--dynamo_backend", "no",
               "--main_process_port", str(port), *cmd[1:]]  # fmt: skip
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return [json.loads((out / f"rank{r}.json").read_text()) for r in range(processes)]


@pytest.fixture(scope="module")
def one_process(tmp_path_factory) -> tuple[Path, Path]:
    """(base, out): the tiny policy and the one-process run of its step."""
    root = tmp_path_factory.mktemp("one")
    save_tiny(root / "base")
    (one,) = launch(root / "base", root / "one", 1)
    assert one["steps"][0]["rows"] == 16  # one process: 16 rows in one micro-batch, one step
    assert (one["distributed_type"], one["model_class"]) == (
        "DistributedType.NO",
        "LlamaForCausalLM",
    )
    return root / "base", root / "one"


@pytest.mark.processes
@pytest.mark.parametrize("mode", list(MODES))
def test_two_gloo_processes_give_one_process_first_update_and_dapo_normalizer(
    one_process, tmp_path, mode
):
    base, one = one_process
    ranks = launch(base, tmp_path / "two", 2, mode)
    # both modes run DDP on the CPU: --use_fsdp is dropped by accelerate (module docstring)
    assert {(r["distributed_type"], r["model_class"]) for r in ranks} == {
        ("DistributedType.MULTI_CPU", "DistributedDataParallel")
    }
    assert_same_step(one, tmp_path / "two", 2)

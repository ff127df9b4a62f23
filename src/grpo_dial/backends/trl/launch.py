"""How a trl-backend train job runs: in the job's own process, or under `accelerate launch`.

On the CPU, and on one GPU, the job calls grpo_dial.backends.trl.run.trl_train in its own
process. With train.trl.gpus = N > 1 on CUDA it writes the job's arguments to
`<checkpoint_dir>/trl_job.json` and runs

    accelerate launch --num_processes N [--config_file <train.trl.accelerate_config>]
        -m grpo_dial.backends.trl.launch <checkpoint_dir>/trl_job.json

(the shipped config/accelerate/zero2.yaml, zero3.yaml: DeepSpeed ZeRO-2 / ZeRO-3), one process
per GPU, each on cuda:<LOCAL_RANK>. `launch_command` is the same line as text, standard library
only, for the rule's message at DAG build.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import asdict
from pathlib import Path

from grpo_dial.backends.job import Job

JOB = "trl_job.json"


def launch_command(trl: Mapping, device: str, job: str = f"<checkpoint_dir>/{JOB}") -> str:
    """The command a TRL job runs (text); 'in process' when it needs no launcher."""
    gpus = int(trl.get("gpus", 1))
    if not str(device).startswith("cuda") or gpus <= 1:
        return "in process"
    parts = ["accelerate launch", f"--num_processes {gpus}"]
    if trl.get("accelerate_config"):
        parts.append(f"--config_file {trl['accelerate_config']}")
    return " ".join([*parts, f"-m grpo_dial.backends.trl.launch {job}"])


def job_gpus(backend: str, train: Mapping, device: str) -> int:
    """GPUs a train job of an arm on `backend` (its resolved backend, grpo_dial.dag.plan)
    asks its profile for: train.trl.gpus for a trl arm on CUDA, else 1 on CUDA, 0 on the CPU."""
    if not str(device).startswith("cuda"):
        return 0
    return int(train.get("trl", {}).get("gpus", 1)) if backend == "trl" else 1


def job_note(name: str, backend: str, train: Mapping, device: str) -> str | None:
    """One line for a trl arm's train jobs (printed at DAG build): GPUs and launch command;
    None for an own-backend arm."""
    if backend != "trl":
        return None
    gpus = job_gpus(backend, train, device)
    where = f"{gpus} GPU{'s' if gpus > 1 else ''} (gpu={gpus})" if gpus else "the CPU"
    seeds = ", ".join(map(str, train.get("seeds", [])))
    return (
        f"train {name} seeds {seeds}: TRL GRPOTrainer on {where}, "
        f"{launch_command(train.get('trl', {}), device)}"
    )


def train(job: Job) -> None:
    """The trl backend of one train job (grpo_dial.backends.train_arm): in this process on the
    CPU and on one GPU, else one accelerate process per GPU reading the job's file."""
    from grpo_dial.backends.trl.run import trl_train
    from grpo_dial.data.tasks import task_from_spec

    trl = dict(job.launch)
    checkpoint_dir = Path(job.checkpoint_dir)
    if not str(job.config.device).startswith("cuda") or int(trl.get("gpus", 1)) <= 1:
        return trl_train(
            job.base, task_from_spec(job.task), job.arm.dial, job.config, dict(job.outputs),
            checkpoint_dir, job.pass_rates, trl,
        )  # fmt: skip
    checkpoint_dir.mkdir(parents=True, exist_ok=True)
    path = checkpoint_dir / JOB
    spec = {
        "base": job.base, "task": job.task, "dial": job.arm.dial.as_dict(),
        "config": asdict(job.config), "outputs": {k: str(v) for k, v in job.outputs.items()},
        "checkpoint_dir": str(checkpoint_dir), "passrates": job.pass_rates_path, "trl": trl,
    }  # fmt: skip
    path.write_text(json.dumps(spec, default=list), encoding="utf-8")
    exe = Path(sys.executable).with_name("accelerate")
    cmd = [str(exe), *launch_command(trl, "cuda", str(path)).split()[1:]]
    done = subprocess.run(cmd, check=False)
    if done.returncode != 0:
        raise ValueError(f"accelerate launch exited with {done.returncode}: {' '.join(cmd)}")


def _main(job: str) -> None:
    """One accelerate process: the job file's run on cuda:<LOCAL_RANK>."""
    from dataclasses import replace

    from grpo_dial.backends.trl.run import trl_train
    from grpo_dial.core.dial import Dial
    from grpo_dial.data.tasks import task_from_spec
    from grpo_dial.train.config import Allocation, TrainConfig

    spec = json.loads(Path(job).read_text(encoding="utf-8"))
    fields = dict(spec["config"])
    fields["allocation"] = Allocation(**fields["allocation"])
    fields["betas"] = tuple(fields["betas"])
    config = replace(TrainConfig(**fields), device=f"cuda:{os.environ.get('LOCAL_RANK', '0')}")
    pass_rates = None
    if spec["passrates"]:
        from grpo_dial.passrates.tables import read_passrates

        pass_rates = read_passrates(spec["passrates"])
    task = task_from_spec(spec["task"])
    trl_train(
        spec["base"], task, Dial(**spec["dial"]), config, spec["outputs"],
        spec["checkpoint_dir"], pass_rates, spec["trl"],
    )  # fmt: skip


if __name__ == "__main__":
    _main(sys.argv[1])

"""How a trl-backend train job runs: in the job's own process, or under `accelerate launch`.

On one GPU, and on the CPU with train.trl.processes 1, the job calls
grpo_dial.backends.trl.run.trl_train in its own process. Otherwise it writes the job's arguments
to `<checkpoint_dir>/trl_job.json` and runs, with train.trl.gpus = N > 1 on CUDA,

    accelerate launch --num_processes N [--config_file <train.trl.accelerate_config>]
        -m grpo_dial.backends.trl.launch <checkpoint_dir>/trl_job.json

(the shipped config/accelerate/zero2.yaml, zero3.yaml: DeepSpeed ZeRO-2 / ZeRO-3), one process
per GPU, each on cuda:<LOCAL_RANK>; with train.trl.processes = N > 1 on the CPU

    accelerate launch --multi_gpu --num_processes N --num_machines 1 --mixed_precision no
        --dynamo_backend no -m grpo_dial.backends.trl.launch <checkpoint_dir>/trl_job.json

N CPU processes over torch.distributed's gloo (TRL's use_cpu; accelerate's --cpu would start
one), each with the job's threads / N torch threads. `launch_command` is the line as text,
without torch, for the rule's message at DAG build; the job adds a free
--main_process_port, so jobs on one machine do not share a rendezvous. train.trl's keys are
defined once in backends/trl/settings.py.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import asdict
from pathlib import Path

from grpo_dial.backends.job import Job
from grpo_dial.backends.trl.settings import launch_settings

JOB = "trl_job.json"


def launch_command(trl: Mapping, device: str, job: str = f"<checkpoint_dir>/{JOB}") -> str:
    """The command a TRL job runs (text); 'in process' when it needs no launcher."""
    trl = launch_settings(trl)
    if str(device).startswith("cuda"):
        gpus = int(trl["gpus"])
        if gpus <= 1:
            return "in process"
        parts = ["accelerate launch", f"--num_processes {gpus}"]
        if trl["accelerate_config"]:
            parts.append(f"--config_file {trl['accelerate_config']}")
    else:
        processes = int(trl["processes"])
        if processes <= 1:
            return "in process"
        parts = ["accelerate launch --multi_gpu", f"--num_processes {processes}",
                 "--num_machines 1 --mixed_precision no --dynamo_backend no"]  # fmt: skip
    return " ".join([*parts, f"-m grpo_dial.backends.trl.launch {job}"])


def job_gpus(backend: str, train: Mapping, device: str) -> int:
    """GPUs a train job of an arm on `backend` (its resolved backend, grpo_dial.dag.plan)
    asks its profile for: train.trl.gpus for a trl arm on CUDA, else 1 on CUDA, 0 on the CPU."""
    if not str(device).startswith("cuda"):
        return 0
    return int(launch_settings(train.get("trl"))["gpus"]) if backend == "trl" else 1


def job_note(name: str, backend: str, train: Mapping, device: str) -> str | None:
    """One line for a trl arm's train jobs (printed at DAG build): GPUs and launch command;
    None for an own-backend arm."""
    if backend != "trl":
        return None
    gpus = job_gpus(backend, train, device)
    processes = int(launch_settings(train.get("trl"))["processes"])
    where = f"{gpus} GPU{'s' if gpus > 1 else ''} (gpu={gpus})" if gpus else "the CPU"
    if not gpus and processes > 1:
        where = f"{processes} CPU processes (gloo)"
    seeds = ", ".join(map(str, train.get("seeds", [])))
    return (
        f"train {name} seeds {seeds}: TRL GRPOTrainer on {where}, "
        f"{launch_command(train.get('trl', {}), device)}"
    )


def train(job: Job) -> None:
    """The trl backend of one train job (grpo_dial.backends.train_arm): in this process on one
    GPU and on the CPU by default, else one accelerate process per GPU or CPU process, each
    reading the job's file."""
    from grpo_dial.backends.trl.run import trl_train
    from grpo_dial.data.tasks import task_from_spec

    trl = launch_settings(job.launch)
    checkpoint_dir = Path(job.checkpoint_dir)
    device = str(job.config.device)
    if launch_command(trl, device) == "in process":
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
    with socket.socket() as s:  # a free port for this job's rendezvous
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cmd = [str(exe), *launch_command(trl, device, str(path)).split()[1:]]
    cmd[2:2] = ["--main_process_port", str(port)]  # after `launch`
    env = dict(os.environ)
    if not device.startswith("cuda"):  # the job's threads shared by its processes
        import torch

        per = max(1, torch.get_num_threads() // int(trl["processes"]))
        env["OMP_NUM_THREADS"] = str(per)
    done = subprocess.run(cmd, check=False, env=env)
    if done.returncode != 0:
        raise ValueError(f"accelerate launch exited with {done.returncode}: {' '.join(cmd)}")


def _main(job: str) -> None:
    """One accelerate process: the job file's run on cuda:<LOCAL_RANK>, or on the CPU."""
    from dataclasses import replace

    from grpo_dial.backends.trl.run import trl_train
    from grpo_dial.core.dial import Dial
    from grpo_dial.data.tasks import task_from_spec
    from grpo_dial.train.config import Allocation, TrainConfig

    spec = json.loads(Path(job).read_text(encoding="utf-8"))
    fields = dict(spec["config"])
    fields["allocation"] = Allocation(**fields["allocation"])
    fields["betas"] = tuple(fields["betas"])
    config = TrainConfig(**fields)
    if str(config.device).startswith("cuda"):
        config = replace(config, device=f"cuda:{os.environ.get('LOCAL_RANK', '0')}")
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

"""How a trl-backend train job launches: in process, one accelerate process per GPU, or, with
train.trl.processes on the CPU, N gloo processes; the CPU launch run end to end."""

from __future__ import annotations

import pandas as pd
import pytest

from grpo_dial.backends.trl.launch import JOB, job_note, launch_command

CPU_2 = (
    "accelerate launch --multi_gpu --num_processes 2 --num_machines 1 --mixed_precision no "
    "--dynamo_backend no -m grpo_dial.backends.trl.launch j.json"
)


@pytest.mark.parametrize(
    ("trl", "device", "line"),
    [
        ({}, "cpu", "in process"),
        ({"processes": 1, "gpus": 4}, "cpu", "in process"),  # gpus: CUDA only
        ({"processes": 2}, "cpu", CPU_2),
        ({"processes": 3, "gpus": 1}, "cuda", "in process"),  # processes: CPU only
        ({"gpus": 2, "processes": 5}, "cuda:0",
         "accelerate launch --num_processes 2 -m grpo_dial.backends.trl.launch j.json"),
    ],
)  # fmt: skip
def test_the_launch_line_of_each_device(trl, device, line):
    assert launch_command(trl, device, "j.json") == line


def test_the_note_names_the_cpu_processes():
    train = {"seeds": [0, 1], "trl": {"processes": 2}}
    assert job_note("dapo", "trl", train, "cpu") == (
        "train dapo seeds 0, 1: TRL GRPOTrainer on 2 CPU processes (gloo), "
        + CPU_2.replace("j.json", f"<checkpoint_dir>/{JOB}")
    )
    assert job_note("dapo", "trl", {**train, "trl": {}}, "cpu").endswith("the CPU, in process")


@pytest.mark.processes
def test_a_cpu_job_with_two_processes_runs_through_accelerate_and_writes_its_tables(tmp_path):
    """train(job) with train.trl.processes 2: the job file, two gloo processes running the job
    (`python -m grpo_dial.backends.trl.launch`), the tables of every step, and the base and
    final policies evaluated on the main process after training."""
    pytest.importorskip("trl")
    from grpo_dial.backends.job import Job
    from grpo_dial.backends.trl.launch import train
    from grpo_dial.core.dial import read_arm
    from grpo_dial.data.tasks import task_from_spec
    from grpo_dial.policy.model import (
        PolicySpec,
        build_char_tokenizer,
        build_tiny_llama,
        save_policy,
    )
    from grpo_dial.train.config import TrainConfig

    spec = {"name": "arithmetic", "options": {"operands": 2, "digits": 1}}
    tokenizer = build_char_tokenizer(task_from_spec(spec).alphabet)
    spec_model = PolicySpec(n_layers=1, hidden_size=32, n_heads=2, intermediate_size=64)
    save_policy(build_tiny_llama(spec_model, tokenizer, seed=0), tokenizer, tmp_path / "base")
    config = TrainConfig(steps=2, prompts_per_step=2, group_size=4, max_new_tokens=6,
                         eval_every=2, heldout_prompts=4, eval_samples=0, checkpoint_every=1,
                         identity_every=0, train_pool=8, progress=False, seed=3)  # fmt: skip
    names = ("steps", "responses", "mass", "evals", "identity", "allocation")
    outputs = {n: tmp_path / f"{n}.parquet" for n in names}
    outputs["model"] = tmp_path / "final"
    arm = read_arm({"preset": "dapo", "silent": "keep", "std_ddof": 1, "eps": 1e-4},
                   max_new_tokens=6, backend="trl")  # fmt: skip
    job = Job(arm=arm, base=str(tmp_path / "base"), task=spec, config=config, outputs=outputs,
              checkpoint_dir=str(tmp_path / "ckpt"), launch={"processes": 2})  # fmt: skip
    train(job)
    assert (tmp_path / "ckpt" / JOB).exists()
    steps = pd.read_parquet(outputs["steps"])
    responses = pd.read_parquet(outputs["responses"])
    evals = pd.read_parquet(outputs["evals"])
    assert list(steps["step"]) == [1, 2]
    assert responses.groupby("step").size().to_dict() == {1: 8, 2: 8}  # both processes' halves
    assert sorted(set(evals["step"])) == [0, 2]
    assert (tmp_path / "final" / "config.json").exists()

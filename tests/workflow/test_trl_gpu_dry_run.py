"""The trl backend's GPU configs without a GPU: under the SLURM profile each TRL train job asks for
its GPUs, and the dry run names each trl arm's GPUs and launch command."""

from __future__ import annotations

import pytest
import yaml
from conftest import REPO
from test_gpu_workflow import dry_run, job_resources

TRL_ARMS = ("grpo", "dr_grpo", "dapo", "std_constant", "nostd_sequence")  # grpo_adaptive: off


def notes(result) -> dict[str, str]:
    """dial -> its 'grpo-dial: train <dial> seeds ...' line."""
    lines = [x for x in result.stderr.splitlines() if x.startswith("grpo-dial: train ")]
    return {line.split()[2]: line for line in lines}


@pytest.mark.workflow
def test_gpu_trl_lists_each_trl_job_with_one_gpu_and_its_launch():
    result = dry_run("--configfile", "config/gpu_trl.yaml", "--profile", "workflow/profiles/slurm")
    lines = notes(result)
    assert sorted(lines) == sorted(TRL_ARMS)
    for line in lines.values():
        assert line.endswith("seeds 0, 1, 2: TRL GRPOTrainer on 1 GPU (gpu=1), in process")
    trains = [r for rule, r in job_resources(result.stdout) if rule == "train"]
    assert len(trains) == 6 * 3 and all(r["gpu"] == "1" for r in trains)


@pytest.mark.workflow
def test_the_8_gpu_overlay_launches_one_run_with_accelerate_and_zero3():
    result = dry_run(
        "--configfile", "config/gpu_trl.yaml", "config/gpu_trl_8gpu.yaml",
        "--profile", "workflow/profiles/slurm",
    )  # fmt: skip
    launch = (
        "TRL GRPOTrainer on 8 GPUs (gpu=8), accelerate launch --num_processes 8 "
        "--config_file config/accelerate/zero3.yaml -m grpo_dial.backends.trl.launch "
        "<checkpoint_dir>/trl_job.json"
    )
    assert all(line.endswith(launch) for line in notes(result).values())
    trains = {r["gpu"] for rule, r in job_resources(result.stdout) if rule == "train"}
    assert trains == {"8", "1"}  # the TRL arms span 8 GPUs; grpo_adaptive (own) takes 1


@pytest.mark.parametrize("stage", [2, 3])
def test_the_shipped_deepspeed_configs_are_zero_2_and_3(stage):
    config = yaml.safe_load((REPO / "config" / "accelerate" / f"zero{stage}.yaml").read_text())
    assert config["distributed_type"] == "DEEPSPEED"
    assert config["deepspeed_config"]["zero_stage"] == stage


@pytest.mark.workflow
def test_the_trl_overlay_puts_every_default_arm_on_trl_but_the_one_it_cannot_compare():
    """config/trl.yaml restates each arm of the embedded default in TRL's conventions; the arm
    TRL cannot express (adaptive group sizes) is switched off, since its uniform twin (grpo on
    TRL, std_ddof 1) would differ from it: nothing is trained for a comparison then dropped."""
    default = yaml.safe_load((REPO / "config" / "config.yaml").read_text())["dials"]
    overlay = yaml.safe_load((REPO / "config" / "trl.yaml").read_text())["dials"]
    assert sorted(overlay) == sorted(default)
    assert overlay["grpo_adaptive"] is None
    result = dry_run("--configfile", "config/config.yaml", "config/trl.yaml")
    lines = notes(result)
    assert sorted(lines) == sorted(TRL_ARMS)
    assert all(line.endswith("seeds 0, 1: TRL GRPOTrainer on the CPU, in process")
               for line in lines.values())  # fmt: skip
    assert "no uniform twin" not in result.stderr and "grpo_adaptive" not in result.stdout

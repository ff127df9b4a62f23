"""GPU and cluster execution without a GPU: dry runs of config/gpu.yaml locally, with the SLURM
profile and with the local multi-GPU profile and the base-model wiring (the per-job GPU claim is
tested in tests/policy/test_devices.py; the device check in tests/tools/test_device_check.py)."""

from __future__ import annotations

import os
import subprocess

import pytest
import yaml
from conftest import REPO
from test_workflow import SNAKEMAKE, planned_jobs

GPU_RULES = ("estimate_pass_rates", "calibrate_lr", "train", "warm_start")


def dry_run(*args: str, cwd=REPO, env: dict | None = None) -> subprocess.CompletedProcess:
    result = subprocess.run(
        [*SNAKEMAKE, "-n", "--forceall", *args],
        cwd=cwd,
        env=None if env is None else {**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return result


def job_resources(stdout: str) -> list[tuple[str, dict[str, str]]]:
    """(rule, resources) of every job block of a dry run, in printed order."""
    jobs, rule = [], None
    for line in stdout.splitlines():
        line = line.strip()
        if line.startswith(("rule ", "localrule ")) and line.endswith(":"):
            rule = line.split()[1].rstrip(":")
        elif line.startswith("resources:") and rule is not None:
            pairs = [p.strip().split("=", 1) for p in line[len("resources:") :].split(",")]
            jobs.append((rule, {k: v for k, v in pairs}))
            rule = None
    return jobs


def gpu_settings() -> tuple[dict, dict]:
    """(the embedded default, config/gpu.yaml): the overlay's dials add to the default's."""
    default = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    gpu = yaml.safe_load((REPO / "config" / "gpu.yaml").read_text())
    return default, gpu


@pytest.fixture(scope="module")
def gpu_dry_run() -> subprocess.CompletedProcess:
    return dry_run("--configfile", "config/gpu.yaml", "--cores", "4")


def test_gpu_config_dry_run_lists_the_expected_jobs(gpu_dry_run):
    default, gpu = gpu_settings()
    result = gpu_dry_run
    jobs = planned_jobs(result.stdout)
    runs = len({**default["dials"], **gpu["dials"]}) * len(gpu["train"]["seeds"])
    assert runs == 18  # the presets, the single-factor arms and grpo_adaptive, 3 seeds
    assert jobs["convert_smollm"] == 1  # model.base: smollm2 is converted, not warm-started
    assert "warm_start" not in jobs and "calibrate_lr" not in jobs
    assert jobs["estimate_pass_rates"] == 1
    assert jobs["train"] == runs and jobs["decompose_length"] == runs
    assert jobs["training_summary"] == 1 and jobs["training_figures"] == 1
    assert {"theory_tables", "simulate", "difficulty_analysis"} <= set(jobs)  # analysis stays
    resources = job_resources(result.stdout)
    trains = [r for rule, r in resources if rule == "train"]
    assert len(trains) == runs and all(r.get("gpu") == "1" for r in trains)
    assert all(r.get("gpu", "0") == "0" for rule, r in resources if rule not in GPU_RULES)
    # the conversion is an input of every job that loads the base model
    blocks = result.stdout.split("\n\n")
    for rule in ("estimate_pass_rates", "train"):
        block = next(b for b in blocks if f"rule {rule}:" in b)
        assert "results/gpu/models/smollm2-135m-instruct" in block, block


def test_larger_hub_model_config_plans_its_runs_without_building_a_model():
    result = dry_run("--configfile", "config/qwen_bigmath.yaml", "--cores", "4")
    jobs = planned_jobs(result.stdout)
    assert jobs["train"] == 18 and jobs["estimate_pass_rates"] == 1
    assert "convert_smollm" not in jobs and "warm_start" not in jobs  # a hub id, used as given
    assert jobs["passrates"] >= 2  # Big-Math's own table joins the analysis half
    trains = [r for rule, r in job_resources(result.stdout) if rule == "train"]
    assert all(r["gpu"] == "1" for r in trains)


def test_slurm_profile_resolves_every_job_with_gpu_resources_on_training(gpu_dry_run):
    local = planned_jobs(gpu_dry_run.stdout)
    result = dry_run("--configfile", "config/gpu.yaml", "--profile", "workflow/profiles/slurm")
    assert planned_jobs(result.stdout) == local  # every job resolves under the executor
    resources = dict(job_resources(result.stdout))
    profile = yaml.safe_load((REPO / "workflow/profiles/slurm/config.yaml").read_text())
    assert profile["executor"] == "slurm"
    for rule in ("estimate_pass_rates", "train"):
        wanted = profile["set-resources"][rule]
        got = resources[rule]
        assert got["gpu"] == "1", (rule, got)
        assert got["mem_mb"] == str(wanted["mem_mb"]) and got["runtime"] == str(wanted["runtime"])
        assert got["cpus_per_task"] == str(wanted["cpus_per_task"])
    assert resources["convert_smollm"].get("gpu", "0") == "0"
    assert resources["theory_tables"]["mem_mb"] == str(profile["default-resources"]["mem_mb"])


def test_slurm_profile_asks_no_gpu_for_the_cpu_default():
    result = dry_run("--profile", "workflow/profiles/slurm")
    trains = [r for rule, r in job_resources(result.stdout) if rule == "train"]
    assert trains and all(r["gpu"] == "0" for r in trains)


def test_local_gpu_profile_takes_its_gpu_count_from_the_machine():
    profile = yaml.safe_load((REPO / "workflow/profiles/local_gpus/config.yaml").read_text())
    assert not any(r.startswith("gpu=") for r in profile.get("resources", []))  # not hard-coded
    result = dry_run(
        "--configfile", "config/gpu.yaml", "--profile", "workflow/profiles/local_gpus",
        env={"CUDA_VISIBLE_DEVICES": "0,1,2"},
    )  # fmt: skip
    assert "GPU jobs at once: 3 (visible GPUs: 3" in result.stderr
    gpu_jobs = [rule for rule, r in job_resources(result.stdout) if r.get("gpu") == "1"]
    assert sorted(set(gpu_jobs)) == ["estimate_pass_rates", "train"]


@pytest.mark.parametrize(
    ("visible", "args", "limit"),
    [
        ("0", (), "1"),
        ("GPU-a,GPU-b", (), "2"),
        ("", (), "1"),
        ("0,1", ("--resources", "gpu=1"), None),
    ],
)
def test_default_profile_limits_gpu_jobs_to_the_visible_gpus(visible, args, limit):
    """Under the default profile the scheduler's gpu limit is the visible GPU count (a dry run
    on a machine without one plans as for one); an explicit --resources gpu=N wins."""
    result = dry_run("--configfile", "config/gpu.yaml", "--cores", "4", *args,
                     env={"CUDA_VISIBLE_DEVICES": visible})  # fmt: skip
    line = [x for x in result.stderr.splitlines() if x.startswith("GPU jobs at once")]
    assert [x.split(":")[1].split()[0] for x in line] == ([limit] if limit else [])


def test_cpu_config_declares_no_gpu_limit_message():
    result = dry_run("--cores", "1", env={"CUDA_VISIBLE_DEVICES": "0"})
    assert "GPU jobs at once" not in result.stderr


@pytest.mark.parametrize(
    ("base", "built"),
    [("smollm2", "convert_smollm"), ("hub:some-org/some-model", None)],  # tiny: test_workflow
)
def test_base_model_decides_what_the_workflow_builds(tmp_path, base, built):
    config = yaml.safe_load((REPO / "config" / "smoke.yaml").read_text())
    config["results_dir"] = str(tmp_path / "results")
    config["model"]["base"] = base
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    result = dry_run(
        "--snakefile",
        str(REPO / "Snakefile"),
        "--directory",
        str(tmp_path),
        "--configfile",
        str(path),
        "--replace-workflow-config",
        "--cores",
        "1",
    )
    jobs = planned_jobs(result.stdout)
    for rule in ("convert_smollm", "warm_start"):
        assert (jobs.get(rule, 0) == 1) == (rule == built), (rule, jobs)


def test_bad_precision_fails_before_any_job(tmp_path):
    config = yaml.safe_load((REPO / "config" / "smoke.yaml").read_text())
    config["results_dir"] = str(tmp_path / "results")
    config["train"]["precision"] = "fp16"
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    result = subprocess.run(
        [*SNAKEMAKE, "-n", "--snakefile", str(REPO / "Snakefile"), "--directory", str(tmp_path)]
        + ["--configfile", str(path), "--replace-workflow-config", "--cores", "1"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode != 0
    assert "config error at 'train.precision'" in result.stdout + result.stderr
    assert "Traceback" not in result.stdout + result.stderr


def test_rule_params_reach_the_train_config():
    """What the rules pass (train section, model.attn_implementation, device) is what trains."""
    from grpo_dial.core.dial import arm_fields, read_arm
    from grpo_dial.stages import policy as policy_stages

    params = {
        "train": {"steps": 2, "precision": "bf16", "gradient_checkpointing": True},
        "pass_rates": {"pool": 8, "seed": 3},
        "arm": arm_fields(read_arm({"preset": "grpo"})),
        "attn_implementation": "eager",
        "device": "cpu",
        "threads": 1,
    }
    prepared = policy_stages._prepare_job(params)
    assert prepared == params  # "cpu" needs no claim
    _, config = policy_stages._arm(prepared)
    assert (config.precision, config.gradient_checkpointing) == ("bf16", True)
    assert config.attn_implementation == "eager" and config.device == "cpu"
    assert (config.train_pool, config.pool_seed) == (8, 3)

"""The DAG build's decisions: each arm resolved once, uniform twins matched on resolved Dials,
stateful estimators named, and the plan of the embedded default."""

from __future__ import annotations

import copy
from dataclasses import asdict
from pathlib import Path

import pytest
import yaml

from grpo_dial.core.dial import Dial, arm_from_fields, preset, read_arm
from grpo_dial.dag import ConfigError
from grpo_dial.dag.arms import allocation_pairs, resolve_arms, stateful
from grpo_dial.dag.plan import build_plan
from grpo_dial.dag.resources import gpu_jobs
from grpo_dial.dag.schema import validate_config

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = ROOT / "workflow" / "schemas" / "config.schema.yaml"
TRAIN = {"allocation": {"g_max": 16}, "max_new_tokens": 24}


def _arms(dials: dict) -> dict:
    return resolve_arms({"dials": dials, "train": TRAIN})


def test_twins_are_matched_on_the_resolved_dial_not_the_written_keys():
    arms = _arms({
        "grpo": {"preset": "grpo", "std_power": 1},
        "dapo": {"preset": "dapo"},
        "grpo_adaptive": {"preset": "grpo", "group_size": "adaptive"},
        "dr_adaptive": {"std_power": 0.0, "length_norm": "constant", "group_size": "adaptive"},
        "dr_grpo": {"preset": "dr_grpo"},
    })  # fmt: skip
    assert allocation_pairs(arms) == {"grpo_adaptive": "grpo", "dr_adaptive": "dr_grpo"}
    # the constant normalizer's L_max is the generation limit, resolved once for every arm
    assert arms["dr_grpo"].dial.max_length == 24
    assert arms["grpo_adaptive"].allocation.g_max == 16


def test_an_arm_problem_names_the_arm():
    line = r"^config error at 'dials\.x\.std_power': std_power must be in \[0, 1\], got 1\.5$"
    with pytest.raises(ConfigError, match=line):
        _arms({"x": {"std_power": 1.5}})
    with pytest.raises(ConfigError, match="unknown dial key 'g_max'"):
        _arms({"x": {"g_max": 4}})


def test_a_job_rebuilds_the_arm_from_its_fields():
    arm = read_arm({"preset": "dapo", "group_size": "adaptive"}, {"g_max": 8}, max_new_tokens=9)
    fields = {"dial": arm.dial.as_dict(), "allocation": asdict(arm.allocation), "backend": "own"}
    assert arm_from_fields(copy.deepcopy(fields)) == arm
    with pytest.raises(ValueError, match="std_power"):
        arm_from_fields({**fields, "dial": {**fields["dial"], "std_power": 3.0}})


def test_stateful_arms_are_the_newer_estimators():
    assert [stateful(read_arm({"preset": p})) for p in ("grpo", "dr_grpo", "dapo")] == [False] * 3
    names = ("lambda_grpo", "stratified_grpo", "hadw_grpo")
    assert all(stateful(read_arm({"preset": p})) for p in names)
    assert preset("grpo") == Dial()


def test_gpu_jobs_count_visible_gpus_or_one():
    assert gpu_jobs(0, visible=0) == 0
    assert gpu_jobs(1, visible=0) == 1
    assert gpu_jobs(1, visible=4) == 4


def test_the_default_plans_every_arm_once(tmp_path):
    config = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    config["results_dir"] = str(tmp_path / "results")
    config["resources_dir"] = str(tmp_path / "resources")
    validate_config(config, SCHEMA)
    plan = build_plan(config, ROOT, tmp_path)
    assert list(plan.arms) == list(config["dials"])
    assert plan.runs == [[d, s] for d in config["dials"] for s in config["train"]["seeds"]]
    for name, arm in plan.arms.items():
        assert arm_from_fields(plan.arm_fields[name]) == arm
    assert set(plan.allocation_pairs) <= set(plan.arms)
    assert plan.tables[-1] == "base_policy"


def test_the_plan_names_each_arms_backend_and_refuses_what_trl_cannot_train(tmp_path):
    config = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    config["results_dir"] = str(tmp_path / "results")
    config["resources_dir"] = str(tmp_path / "resources")
    trl_grpo = {"preset": "grpo", "std_ddof": 1, "eps": 1e-4}  # TRL's scale_rewards="group"
    config["dials"] = {
        "grpo": {**trl_grpo, "backend": "trl"},
        "grpo_adaptive": {**trl_grpo, "group_size": "adaptive"},
    }
    validate_config(config, SCHEMA)
    assert build_plan(config, ROOT, tmp_path).backends == {"grpo": "trl", "grpo_adaptive": "own"}
    config["train"]["backend"] = "trl"  # the adaptive arm now trains on TRL too: refused
    with pytest.raises(ConfigError) as refused:
        build_plan(config, ROOT, tmp_path)
    assert str(refused.value) == (
        "config error at 'dials.grpo_adaptive.group_size': the trl backend cannot train "
        "group_size = 'adaptive': TRL gives every prompt num_generations responses (backend: own "
        "can; config/trl.yaml restates the default's arms for TRL)"
    )


def test_an_aware_study_arm_on_trl_is_refused_by_name(tmp_path):
    """The aware study's sweep cells and probe train in one process on the own trainer
    (backends.in_process): an arm on trl is refused at DAG build, naming the arm and its backend,
    not scheduled and trained on the own trainer without a word."""
    config = yaml.safe_load((ROOT / "config" / "length_aware.yaml").read_text())
    config["results_dir"] = str(tmp_path / "results")
    config["resources_dir"] = str(tmp_path / "resources")
    config["dials"] = {"grpo": {"preset": "grpo"}}
    validate_config(config, SCHEMA)
    assert build_plan(copy.deepcopy(config), ROOT, tmp_path).aware_enabled
    config["dials"]["grpo_trl"] = {"preset": "grpo", "std_ddof": 1, "eps": 1e-4, "backend": "trl"}
    with pytest.raises(ConfigError) as refused:
        build_plan(config, ROOT, tmp_path)
    assert str(refused.value) == (
        "config error at 'dials.grpo_trl.backend': the aware study trains its sweep cells and "
        "probe in one process on the own trainer, not on 'trl'; set backend: own"
    )


def _sweep_config(tmp_path, later: dict | None = None) -> dict:
    """config/length_aware.yaml under length_aware_sweep.yaml (merged as Snakemake merges),
    validated, with `later` over aware_sweep.later_probe."""
    config = yaml.safe_load((ROOT / "config" / "length_aware.yaml").read_text())
    for key, value in yaml.safe_load((ROOT / "config" / "length_aware_sweep.yaml")
                                     .read_text()).items():  # fmt: skip
        config[key] = {**config.get(key, {}), **value} if isinstance(value, dict) else value
    config["results_dir"] = str(tmp_path / "results")
    config["resources_dir"] = str(tmp_path / "resources")
    config["aware_sweep"]["later_probe"].update(later or {})
    validate_config(config, SCHEMA)
    return config


def test_the_later_state_probe_replays_the_sweeps_arms_and_refuses_a_bad_setting(tmp_path):
    """aware_sweep.later_probe: the sweep's arms planned; off without SGD cells or steps; a seed
    outside train.seeds, an arm outside dials or a step not before the 53.5 updates behind a
    60-step run's last window (window 12 steps) is one line naming the entry."""
    plan = build_plan(_sweep_config(tmp_path), ROOT, tmp_path)
    assert plan.aware_later == ["grpo", "nostd_sequence", "dr_grpo"]
    assert build_plan(_sweep_config(tmp_path, {"steps": [53]}), ROOT, tmp_path).aware_later
    assert build_plan(_sweep_config(tmp_path, {"steps": []}), ROOT, tmp_path).aware_later == []
    adamw = _sweep_config(tmp_path, {"seeds": [99]})
    adamw["aware_sweep"]["optimizers"] = ["adamw"]  # no SGD cell: nothing to replay, no check
    assert build_plan(adamw, ROOT, tmp_path).aware_later == []
    for later, line in (
        ({"seeds": [0, 12]}, "'aware_sweep.later_probe.seeds.1': seed 12 is not one of "
                             "train.seeds"),
        ({"arms": ["grpo", "dapo"]}, "'aware_sweep.later_probe.arms.1': 'dapo' is not an arm of "
                                     "dials (grpo, dr_grpo, nostd_sequence, dr_grpo_l3)"),
        ({"steps": [20, 54]}, "'aware_sweep.later_probe.steps.1': step 54 is not before the "
                              "53.5 updates behind the runs' last window (train.steps 60, "
                              "decompose.window_fraction 0.2); list earlier steps, or [] to "
                              "switch the probe off"),
    ):  # fmt: skip
        with pytest.raises(ConfigError) as refused:
            build_plan(_sweep_config(tmp_path, later), ROOT, tmp_path)
        assert str(refused.value) == f"config error at {line}"

"""What the DAG build makes of the arms a config writes: an arm written `{}` is GRPO's default
dial and is trained, an arm set to null is switched off, and an adaptive arm is compared with
its uniform twin, whose runs are planned beside its own; an adaptive arm without a twin, or a
config whose arms are all off, plans no comparison."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from grpo_dial.core.dial import Dial
from grpo_dial.dag import ConfigError
from grpo_dial.dag.plan import build_plan
from grpo_dial.dag.schema import validate_config

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = ROOT / "workflow" / "schemas" / "config.schema.yaml"


def _plan(dials: dict, tmp_path: Path, seeds: tuple[int, ...] = (0, 1), simulate=None):
    """The embedded default with `dials` (and simulate.tables) replaced, validated, planned."""
    config = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    if simulate is not None:
        config["simulate"]["tables"] = simulate
    config["results_dir"] = str(tmp_path / "results")
    config["resources_dir"] = str(tmp_path / "resources")
    config["dials"] = dials
    config["train"]["seeds"] = list(seeds)
    validate_config(config, SCHEMA)
    return config, build_plan(config, ROOT, tmp_path)


def test_an_empty_arm_is_grpo_and_a_null_arm_is_off(tmp_path):
    config, plan = _plan(
        {
            "plain": {},  # no preset, no field: GRPO's default dial
            "off": None,  # an overlay's way to switch an arm off
            "dr_grpo": {"preset": "dr_grpo"},
        },
        tmp_path,
    )
    assert list(config["dials"]) == ["plain", "dr_grpo"]
    assert list(plan.arms) == ["plain", "dr_grpo"]
    assert plan.arms["plain"].dial == Dial() and plan.arms["plain"].allocation.scheme == "uniform"
    assert plan.runs == [["plain", 0], ["plain", 1], ["dr_grpo", 0], ["dr_grpo", 1]]
    assert plan.policy_enabled and plan.allocation_pairs == {} and plan.allocation_runs == []


def test_the_uniform_twin_of_an_adaptive_arm_is_planned_in_the_comparison(tmp_path):
    adaptive = {"preset": "grpo", "group_size": "adaptive"}
    _, plan = _plan(
        {
            "dr_grpo": {"preset": "dr_grpo"},
            "adaptive_g8": {**adaptive, "allocation": {"g_max": 8}},  # same Dial, adaptive too
            "plain": {},  # the twin: the same resolved Dial as grpo's preset, uniform
            "grpo_adaptive": adaptive,
            "dapo_adaptive": {"preset": "dapo", "group_size": "adaptive"},  # no uniform twin
        },
        tmp_path,
    )
    assert plan.allocation_pairs == {"adaptive_g8": "plain", "grpo_adaptive": "plain"}
    assert plan.allocation_runs == [
        ["adaptive_g8", 0], ["adaptive_g8", 1], ["grpo_adaptive", 0], ["grpo_adaptive", 1],
        ["plain", 0], ["plain", 1],
    ]  # fmt: skip
    assert len(plan.runs) == 5 * 2  # every arm still trains, the twinless one included


def test_arms_all_off_plan_no_policy(tmp_path):
    off = {"grpo": None, "grpo_adaptive": None}
    with pytest.raises(ConfigError, match="'simulate.tables': 'base_policy' is the trained"):
        _plan(off, tmp_path)  # the default simulates the base policy, which no arm now needs
    _, plan = _plan(off, tmp_path, simulate=["synthetic"])
    assert plan.arms == {} and not plan.policy_enabled and "base_policy" not in plan.tables
    assert plan.runs == [] and plan.allocation_runs == []

"""dag.plan: each decision of build_plan and open_plan the other tests leave open, on the
default config with one setting changed."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from grpo_dial.dag import ConfigError
from grpo_dial.dag.plan import build_plan, open_plan
from grpo_dial.dag.schema import validate_config

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = ROOT / "workflow" / "schemas" / "config.schema.yaml"


def _config(tmp_path) -> dict:
    config = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    config["results_dir"] = str(tmp_path / "results")
    config["resources_dir"] = str(tmp_path / "resources")
    validate_config(config, SCHEMA)
    return config


def _refused(config, tmp_path, line: str) -> None:
    with pytest.raises(ConfigError, match=f"^{re.escape(line)}$"):
        build_plan(config, ROOT, tmp_path)


def test_open_plan_fills_the_defaults_and_plans(tmp_path):
    config = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    config["results_dir"] = str(tmp_path / "results")
    config["resources_dir"] = str(tmp_path / "resources")
    del config["runs"]
    plan = open_plan(config, [], ROOT, tmp_path)
    assert config["runs"] == {} and list(plan.arms) == list(config["dials"])
    assert plan.sim_tables == config["simulate"]["tables"] == ["synthetic", "base_policy"]
    assert plan.real_length_inputs.keys() == {"math_cot", "gsm8k"}


def test_open_plan_raises_the_file_and_value_checks_line(tmp_path):
    config = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    config["train"]["lr"] = "1e-4"
    with pytest.raises(ConfigError, match="^config error at 'train.lr': '1e-4' is text"):
        open_plan(config, [], ROOT, tmp_path)


def test_a_base_model_folder_or_hub_id(tmp_path):
    config = _config(tmp_path)
    (tmp_path / "model").mkdir()
    config["model"]["base"] = str(tmp_path / "model")
    assert build_plan(config, ROOT, tmp_path).base_model == str(tmp_path / "model")
    config["model"]["base"] = "hub:owner/name"
    assert build_plan(config, ROOT, tmp_path).base_model == []
    config["model"]["base"] = str(tmp_path / "gone")
    line = f"policy directory not found: {tmp_path / 'gone'}"
    _refused(config, tmp_path, f"config error at 'model.base': {line}")


def test_all_zero_style_weights_are_refused(tmp_path):
    config = _config(tmp_path)
    config["warm_start"]["style_weights"] = {"terse": 0.0, "worked": 0.0, "rechecked": 0.0}
    line = "every weight is 0; give at least one style a weight > 0"
    _refused(config, tmp_path, f"config error at 'warm_start.style_weights': {line}")


def test_table_lines_name_their_key(tmp_path):
    config = _config(tmp_path)
    config["train"]["steps"] = 0  # no arm trains: base_policy is no table
    config["simulate"]["tables"] = ["synthetic"]
    config["dapo_consistency"]["table"] = "base_policy"
    _refused(config, tmp_path, "config error at 'dapo_consistency.table': 'base_policy' is the "
             "trained policy's table, but no arm trains (dials is empty or every arm is null); "
             "remove it or add an arm")  # fmt: skip
    config = _config(tmp_path)
    defined = sorted(config["passrate_tables"])
    config["simulate"]["tables"] = ["nope"]
    _refused(config, tmp_path, f"config error: unknown pass-rate table 'nope'; defined: {defined}")
    config = _config(tmp_path)
    config["length_bias"]["tables"] = ["nope"]
    _refused(config, tmp_path, "config error: unknown pass-rate table 'nope' in "
             f"length_bias.tables; defined: {defined} and base_policy")  # fmt: skip


def test_reference_arms_are_checked_where_they_are_used(tmp_path):
    config = _config(tmp_path)
    config["train"]["lr_match"] = {"enabled": True, "reference": "grpo"}
    assert build_plan(config, ROOT, tmp_path).arms
    config["train"]["lr_match"]["reference"] = "nope"
    line = f"'nope' is not in dials {sorted(config['dials'])}"
    _refused(config, tmp_path, f"config error at 'train.lr_match.reference': {line}")
    config = _config(tmp_path)
    config["task"]["options"] = {"tail_checks": 2}
    config["channel"]["reference"] = "grpo"
    assert build_plan(config, ROOT, tmp_path).channel_enabled
    config["channel"]["reference"] = "nope"
    _refused(config, tmp_path, f"config error at 'channel.reference': {line}")


def test_the_aware_task_turns_the_aware_study_on(tmp_path):
    config = _config(tmp_path)
    assert not build_plan(config, ROOT, tmp_path).aware_enabled
    config["task"] = {"name": "aware", "options": {}}
    assert build_plan(config, ROOT, tmp_path).aware_enabled


def test_optional_inputs_are_skipped_and_required_ones_named(tmp_path):
    config = _config(tmp_path)
    gone = str(tmp_path / "gone.jsonl")
    config["real_lengths"].update(math_cot=gone, gsm8k=None, optional=True)
    config["dapo_consistency"].update(curve=gone, optional=True)
    plan = build_plan(config, ROOT, tmp_path)
    assert plan.real_length_inputs == {} and plan.dapo_curve is None
    here = tmp_path / "here.jsonl"
    here.write_text("")
    config["dapo_consistency"]["curve"] = str(here)
    config["real_lengths"].update(gsm8k=str(here), tokenizer=str(tmp_path / "tok"))
    line = f"tokenizer directory not found: {tmp_path / 'tok'}"
    _refused(config, tmp_path, f"config error at 'real_lengths.tokenizer': {line}")
    config["real_lengths"]["tokenizer"] = None
    plan = build_plan(config, ROOT, tmp_path)
    assert plan.real_length_inputs == {"gsm8k": str(here)} and plan.dapo_curve == str(here)


def test_external_runs_with_their_tokenizer(tmp_path):
    config = _config(tmp_path)
    here = tmp_path / "run"
    here.mkdir()
    config["runs"] = {
        "r": {"format": "trl", "path": str(here), "optional": False},
        "skipped": {"format": "trl", "path": str(tmp_path / "gone"), "optional": True},
    }
    assert build_plan(config, ROOT, tmp_path).runs_external == ["r"]
    config["runs"]["r"]["tokenizer"] = str(tmp_path / "tok")
    line = f"tokenizer directory not found: {tmp_path / 'tok'}"
    _refused(config, tmp_path, f"config error at 'runs.r.tokenizer': {line}")


def test_policy_lines_name_their_key(tmp_path):
    config = _config(tmp_path)
    config["model"]["spec"]["hidden_size"] = 130
    line = "4 heads do not divide hidden_size 130"
    _refused(config, tmp_path, f"config error at 'model.spec.n_heads': {line}")
    config = _config(tmp_path)
    config["length_bias"]["n_prompts"] = 250
    _refused(config, tmp_path, "config error: length_bias.n_prompts must be a multiple of "
             "length_bias.groups_per_batch")  # fmt: skip
    from grpo_dial.dag.inputs import Inputs
    from grpo_dial.dag.plan import _base_model

    config = {**_config(tmp_path), "offline": True}
    config["model"]["base"] = "hub:o/n"
    with pytest.raises(ConfigError, match="^config error at 'model.base': offline: true refuses"):
        _base_model(config, Inputs(config, ROOT, tmp_path), True)


def test_without_training_a_missing_base_model_is_not_read(tmp_path):
    config = _config(tmp_path)
    config["train"]["steps"] = 0
    config["simulate"]["tables"] = config["length_bias"]["tables"] = ["synthetic"]
    config["model"]["base"] = str(tmp_path / "gone")
    plan = build_plan(config, ROOT, tmp_path)
    assert plan.base_model == [] and plan.task == {"name": "arithmetic", "options": {}}


def test_open_plan_raises_the_schemas_line(tmp_path):
    config = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    config["train"]["steps"] = -1
    with pytest.raises(ConfigError, match="^config error at 'train.steps': -1 is less than"):
        open_plan(config, [], ROOT, tmp_path)


def test_the_base_policys_length_bias_table_is_planned_when_the_policy_chain_runs(tmp_path):
    """length_bias.tables may name base_policy: planned (after the configured tables, in the
    config's order) exactly when an arm trains, so its analysis never vanishes silently."""
    config = _config(tmp_path)
    assert config["length_bias"]["tables"] == ["synthetic", "base_policy"]
    plan = build_plan(config, ROOT, tmp_path)
    assert plan.length_bias_tables == ["synthetic", "base_policy"]
    assert plan.tables == ["synthetic", "gsm8k_logged", "math_cot_100", "base_policy"]
    config["length_bias"]["tables"] = ["base_policy", "math_cot_100"]
    assert build_plan(config, ROOT, tmp_path).length_bias_tables == ["base_policy", "math_cot_100"]
    config["length_bias"]["tables"] = ["base_policy"]
    assert build_plan(config, ROOT, tmp_path).length_bias_tables == ["base_policy"]
    config["length_bias"]["tables"] = ["synthetic", "base_policy"]
    config["simulate"]["tables"] = ["synthetic"]  # which refuses base_policy without training
    config["dapo_consistency"]["table"] = "synthetic"
    for off in ({"dials": {}}, {"train": {**config["train"], "steps": 0}}):
        quiet = {**config, **off}  # no arm trains: the analysis half alone, no base policy
        plan = build_plan(quiet, ROOT, tmp_path)
        assert plan.length_bias_tables == ["synthetic"] and "base_policy" not in plan.tables

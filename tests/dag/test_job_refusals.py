"""The DAG build refuses what a job would: each input below gives one line naming its key (through
open_plan, the config's one door), and its valid neighbour is still planned."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from grpo_dial.dag import ConfigError
from grpo_dial.dag.plan import open_plan

ROOT = Path(__file__).resolve().parents[2]
DEFAULT = ROOT / "config" / "config.yaml"
TRL_GRPO = {"preset": "grpo", "std_ddof": 1, "eps": 0.0001, "backend": "trl"}


def _config(tmp_path: Path, **sections) -> dict:
    config = yaml.safe_load(DEFAULT.read_text())
    config["results_dir"] = str(tmp_path / "results")
    config["resources_dir"] = str(tmp_path / "resources")
    config.update(sections)
    return config


def _refused(config: dict, tmp_path: Path, start: str, files: tuple = ()) -> str:
    with pytest.raises(ConfigError) as info:
        open_plan(config, [DEFAULT, *files], ROOT, tmp_path)
    line = str(info.value)
    assert line.startswith(start), line
    assert "\n" not in line and len(line) < 600
    return line


def _planned(config: dict, tmp_path: Path, files: tuple = ()):
    return open_plan(config, [DEFAULT, *files], ROOT, tmp_path)


def _trl(tmp_path: Path, trl: dict, arm: dict | None = None, device: str = "cpu") -> dict:
    config = _config(tmp_path, dials={"t": arm or TRL_GRPO})
    config["train"]["trl"] = trl
    config["model"]["device"] = device
    return config


def test_trl_processes_must_split_the_step_batch(tmp_path):
    start = "config error at 'train.trl.processes': "
    line = _refused(_trl(tmp_path, {"processes": 3}), tmp_path, start)
    assert "prompts_per_step x group_size = 128 completions do not split evenly over 3" in line
    assert _planned(_trl(tmp_path, {"processes": 2}), tmp_path).backends == {"t": "trl"}
    # on CUDA the run spans train.trl.gpus processes; processes is ignored there
    cuda = _trl(tmp_path, {"gpus": 3}, device="cuda")
    _refused(cuda, tmp_path, "config error at 'train.trl.gpus': ")
    _planned(_trl(tmp_path, {"gpus": 4, "processes": 3}, device="cuda"), tmp_path)


def test_trl_bnpo_rows_must_divide_a_process_share(tmp_path):
    bnpo = {**TRL_GRPO, "length_norm": "bnpo", "bnpo_rows": 5}
    start = "config error at 'dials.t.bnpo_rows': "
    line = _refused(_trl(tmp_path, {"processes": 2}, bnpo), tmp_path, start)
    assert "bnpo_rows = 5 does not divide each process's 64 completions" in line
    _planned(_trl(tmp_path, {"processes": 2}, {**bnpo, "bnpo_rows": 8}), tmp_path)
    # the own backend splits no batch over processes: the same setting is the trl arm's alone
    _planned(_trl(tmp_path, {"processes": 3}, {"preset": "grpo", "backend": "own"}), tmp_path)


def test_a_missing_accelerate_config_names_the_key_and_path(tmp_path):
    config = _trl(tmp_path, {"gpus": 2, "accelerate_config": "config/accelerate/zero9.yaml"})
    line = _refused(config, tmp_path, "config error at 'train.trl.accelerate_config': ")
    assert "'config/accelerate/zero9.yaml' is not a file" in line and str(tmp_path) in line
    (tmp_path / "zero9.yaml").write_text("distributed_type: DEEPSPEED\n")
    _planned(_trl(tmp_path, {"gpus": 2, "accelerate_config": "zero9.yaml"}), tmp_path)


def test_run_specs_columns_are_checked_at_dag_build(tmp_path):
    log = tmp_path / "log.csv"
    log.write_text("step,prompt,response,reward\n")
    columns = {"step": "step", "prompt": "prompt", "response": "response", "reward": "reward"}
    spec = {"format": "generic", "path": str(log)}
    line = _refused(_config(tmp_path, runs={"r": spec}), tmp_path, "config error at 'runs.r': ")
    assert "format generic needs columns" in line and "step, prompt, response" in line
    typo = {**spec, "columns": {**columns, "rewrd": "reward"}}
    start = "config error at 'runs.r.columns': "
    line = _refused(_config(tmp_path, runs={"r": typo}), tmp_path, start)
    assert "unknown field(s) ['rewrd']; valid: step, prompt, response, reward, correct" in line
    plan = _planned(_config(tmp_path, runs={"r": {**spec, "columns": columns}}), tmp_path)
    assert plan.runs_external == ["r"]


def test_a_null_dial_must_switch_an_existing_arm_off(tmp_path):
    overlay = tmp_path / "overlay.yaml"
    overlay.write_text("dials:\n  dapoo: null\n")
    config = _config(tmp_path)
    config["dials"]["dapoo"] = None  # Snakemake's merge of the overlay over the default
    line = _refused(config, tmp_path, "config error at 'dials.dapoo': null switches an arm off",
                    (overlay,))  # fmt: skip
    assert "no config file defines an arm 'dapoo'" in line and "'dapo'" in line
    overlay.write_text("dials:\n  dapo: null\n")
    config = _config(tmp_path)
    config["dials"]["dapo"] = None
    assert "dapo" not in _planned(config, tmp_path, (overlay,)).arms


@pytest.mark.parametrize("section", ["dials", "passrate_tables", "runs"])
@pytest.mark.parametrize("name", ["grpo\n", "gr\tpo", "a\x1bb"])
def test_names_with_control_characters_are_refused(tmp_path, section, name):
    config = _config(tmp_path)
    config[section] = {name: {}}
    line = _refused(config, tmp_path, f"config error at '{section}': the name {name!r} holds")
    assert "control character" in line


@pytest.mark.parametrize("section", ["dials", "passrate_tables", "runs"])
@pytest.mark.parametrize("name", [1, True])
def test_names_that_are_not_text_are_refused(tmp_path, section, name):
    config = _config(tmp_path)
    config[section] = {name: {}}
    start = f"config error at '{section}': the name {name!r} is not text"
    line = _refused(config, tmp_path, start)
    assert f"(YAML reads it as {type(name).__name__}); quote it" in line


def test_an_adaptive_arm_with_g_max_below_2_is_refused(tmp_path):
    config = _config(tmp_path, dials={"a": {"preset": "grpo", "group_size": "adaptive"}})
    config["train"]["allocation"] = {"g_min": 1, "g_max": 1}
    line = _refused(config, tmp_path, "config error at 'train.allocation.g_max': 1 gives arm 'a'")
    assert "every advantage is 0" in line
    own = {"preset": "grpo", "group_size": "adaptive", "allocation": {"g_min": 1, "g_max": 1}}
    start = "config error at 'dials.a.allocation.g_max': 1 gives arm 'a'"
    _refused(_config(tmp_path, dials={"a": own}), tmp_path, start)
    uniform = _config(tmp_path, dials={"u": {"preset": "grpo"}})
    uniform["train"]["allocation"] = {"g_min": 1, "g_max": 1}  # read by adaptive arms only
    _planned(uniform, tmp_path)
    config["train"]["allocation"] = {"g_min": 1, "g_max": 2}
    _planned(config, tmp_path)


def test_a_yaml_merge_key_is_read_as_safe_load_reads_it(tmp_path):
    overlay = tmp_path / "overlay.yaml"
    overlay.write_text(  # the anchor on an arm: a top-level key of its own is refused as unknown
        "dials:\n  base: &base {preset: grpo, std_power: 1}\n"
        "  merged: {<<: *base, length_norm: token}\n"
    )
    data = yaml.safe_load(overlay.read_text())
    assert data["dials"]["merged"] == {"preset": "grpo", "std_power": 1, "length_norm": "token"}
    config = _config(tmp_path, dials=data["dials"])
    assert list(_planned(config, tmp_path, (overlay,)).arms) == ["base", "merged"]
    overlay.write_text("dials:\n  merged: {<<: {preset: grpo}, std_power: 1, std_power: 0}\n")
    _refused(config, tmp_path, f"config error in {overlay}: key 'std_power' is given twice",
             (overlay,))  # fmt: skip


def test_a_long_value_is_echoed_cut_and_a_large_file_is_not_parsed(tmp_path):
    config = _config(tmp_path)
    config["model"]["device"] = "x" * 10**6
    line = _refused(config, tmp_path, "config error at 'model.device': 'xxx")
    assert re.search(r"\.\.\. \(1000002 characters\) is not a torch device", line)
    config = _config(tmp_path)
    config["train"]["optimizer"] = "y" * 10**6  # the schema's own line
    line = _refused(config, tmp_path, "config error at 'train.optimizer': 'yyy")
    assert "(1000002 characters)" in line
    big = tmp_path / "big.yaml"
    big.write_text("model: {device: '" + "z" * (5 * 2**20) + "'}\n")
    line = _refused(_config(tmp_path), tmp_path, f"config error in {big}: the file is ", (big,))
    assert f"{big.stat().st_size} bytes" in line


@pytest.mark.parametrize(
    ("allocation", "line"),
    [
        ({"g_min": 8, "g_max": 4}, "config error at 'difficulty.allocation.g_max': 4 is below "
         "g_min 8"),
        ({"g_min": 1, "g_max": 1}, "config error at 'difficulty.allocation.g_max': 1 gives groups "
         "of one response: a group of one has no spread, so every advantage is 0; use 2 or more"),
        ({"per_prompt_budget": 1}, "config error at 'difficulty.allocation.per_prompt_budget': 1 "
         "gives groups of one response"),
    ],
)  # fmt: skip
def test_the_difficulty_allocation_bounds_are_checked_at_dag_build(tmp_path, allocation, line):
    import numpy as np

    from grpo_dial.analysis.difficulty import allocate_budget

    config = _config(tmp_path)
    config["difficulty"]["allocation"] = allocation
    _refused(config, tmp_path, line)
    if "g_min" in allocation and allocation["g_max"] < allocation["g_min"]:  # the job's refusal
        with pytest.raises(ValueError, match="must be >= g_min"):
            allocate_budget(np.array([0.5]), 8, "grpo", g_min=8, g_max=4)
    config["difficulty"]["allocation"] = {"per_prompt_budget": 2, "g_min": 1, "g_max": 2}
    _planned(config, tmp_path)


@pytest.mark.parametrize("value", [-1, True, 1.5, [None], "g_max"])
def test_an_arms_allocation_that_is_not_a_mapping_is_one_line(tmp_path, value):
    config = _config(tmp_path, dials={"a": {"preset": "grpo", "allocation": value}})
    line = _refused(config, tmp_path, f"config error at 'dials.a.allocation': {value!r} is not")
    assert line.endswith("is not a mapping; give overrides of train.allocation, e.g. {g_max: 16}")
    config = _config(tmp_path, dials={"a": {"preset": "grpo", "allocation": {"g_max": 16}}})
    _planned(config, tmp_path)

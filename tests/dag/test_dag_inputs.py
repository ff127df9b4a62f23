"""The DAG build's input policy, without Snakemake: output folders, the offline rule for hub
ids, local paths (optional ones skipped with a note), pass-rate table sources, task specs."""

from __future__ import annotations

from pathlib import Path

import pytest

from grpo_dial.dag import ConfigError
from grpo_dial.dag.inputs import Inputs, check_strata, task_inputs

ROOT = Path(__file__).resolve().parents[2]


def _inputs(tmp_path, **over) -> Inputs:
    config = {
        "results_dir": str(tmp_path / "results"),
        "resources_dir": str(tmp_path / "resources"),
        "offline": False,
        "data_mirror": None,
        "public_data": {},
        **over,
    }
    return Inputs(config, ROOT, tmp_path)


def test_offline_refuses_a_hub_id_and_names_the_key(tmp_path):
    assert _inputs(tmp_path).hub_entry("owner/name", "model.base") == "owner/name"
    with pytest.raises(ConfigError, match=r"^config error at 'x.hub': offline: true refuses"):
        _inputs(tmp_path, offline=True).hub_entry("owner/name", "x.hub")
    with pytest.raises(ConfigError, match="is not a hub id"):
        _inputs(tmp_path).hub_entry("not a hub id", "x.hub")


def test_a_missing_optional_file_is_skipped_a_required_one_stops(tmp_path, capsys):
    inputs = _inputs(tmp_path)
    present = tmp_path / "here.jsonl"
    present.write_text("{}\n")
    assert inputs.data_file(str(present), "k") == str(present)
    assert inputs.data_file(str(tmp_path / "gone.jsonl"), "k", optional=True) is None
    assert "skipping" in capsys.readouterr().err
    with pytest.raises(ConfigError, match=r"^config error at 'k': input path not found"):
        inputs.data_file(str(tmp_path / "gone.jsonl"), "k")


def test_output_folders_must_not_nest(tmp_path):
    with pytest.raises(ConfigError, match="must not nest"):
        _inputs(tmp_path, resources_dir=str(tmp_path / "results" / "res"))


def test_table_sources(tmp_path):
    inputs = _inputs(tmp_path)
    assert inputs.table_input("s", {"kind": "synthetic"}) is None
    assert inputs.table_input("b", {"kind": "bigmath", "hub": "o/n"}) is None
    gone = {"kind": "math_cot", "path": str(tmp_path / "none.jsonl"), "optional": True}
    assert inputs.table_input("m", gone) is False
    with pytest.raises(ConfigError, match="give one of path, public, hub"):
        inputs.table_input("m", {"kind": "bigmath", "path": "a", "hub": "o/n"})
    with pytest.raises(ConfigError, match="only kind bigmath reads the hub"):
        inputs.table_input("m", {"kind": "gsm8k", "hub": "o/n"})


def test_task_files_and_strata():
    task = {"name": "arithmetic", "options": {"sources": [{"dataset": "x", "path": "p.jsonl"}]}}
    assert task_inputs(task) == {"task_sources_0": "p.jsonl"}
    arithmetic = {"name": "arithmetic", "options": {}}
    check_strata({"a": "truncated"}, arithmetic)
    with pytest.raises(ConfigError, match=r"'dials.a.strata': stratum key 'check_lines'"):
        check_strata({"a": "check_lines"}, arithmetic)

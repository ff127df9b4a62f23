"""A `runs` spec the import job would refuse is refused at DAG build, in one line naming its key;
the reference is the job's own reader: each spec refused here also fails
grpo_dial.external.importers.import_run on a real run of its format, and each accepted neighbour
imports."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from external_fixtures import write_trl_run, write_verl_run

from grpo_dial.dag import ConfigError
from grpo_dial.dag.plan import open_plan
from grpo_dial.external.importers import import_run

ROOT = Path(__file__).resolve().parents[2]
DEFAULT = ROOT / "config" / "config.yaml"
COLUMNS = {"step": "step", "prompt": "prompt", "response": "response", "reward": "reward"}


def _runs(tmp_path: Path) -> dict[str, str]:
    """A real run of each format: generic (a CSV), trl (completions parquet), verl (jsonl)."""
    log = tmp_path / "log.csv"
    log.write_text(
        "step,prompt,response,reward,ok\n1,p,aa,1.0,1\n1,p,a,0.0,0\n2,p,aaa,1.0,1\n2,p,a,0.0,0\n"
    )
    return {"generic": str(log), "trl": str(write_trl_run(tmp_path / "trl")),
            "verl": str(write_verl_run(tmp_path / "verl"))}  # fmt: skip


def _plan_line(spec: dict, tmp_path: Path) -> str | None:
    """The DAG build's line for a config whose one external run is `spec`; None if planned."""
    config = yaml.safe_load(DEFAULT.read_text())
    config["results_dir"] = str(tmp_path / "results")
    config["resources_dir"] = str(tmp_path / "resources")
    config["runs"] = {"r": spec}
    try:
        plan = open_plan(config, [DEFAULT], ROOT, tmp_path)
    except ConfigError as error:
        return str(error)
    assert plan.runs_external == ["r"]
    return None


REFUSED = [
    (  # the generic importer needs step, prompt, response and reward or correct
        {"format": "generic", "columns": {"step": "step", "reward": "reward"}},
        "config error at 'runs.r.columns': must map step, prompt, response and reward or "
        "correct; missing prompt, response",
    ),
    (
        {"format": "generic", "columns": {k: v for k, v in COLUMNS.items() if k != "reward"}},
        "config error at 'runs.r.columns': must map step, prompt, response and reward or "
        "correct; missing reward/correct",
    ),
    (
        {"format": "generic", "columns": COLUMNS, "reward_column": "rewad"},
        "config error at 'runs.r.reward_column': 'rewad' disagrees with columns' reward: "
        "'reward'; give one of them",
    ),
    (
        {"format": "generic", "columns": {**COLUMNS, "correct": "ok"}, "correct_from": "passed"},
        "config error at 'runs.r.correct_from': 'passed' disagrees with columns' correct: 'ok'",
    ),
    (
        {"format": "trl", "correct_from": "ok", "correct_column": "acc"},
        "config error at 'runs.r.correct_from': 'ok' contradicts correct_column 'acc'; give one",
    ),
    (
        {"format": "verl", "eval_steps": 10},
        "config error at 'runs.r.eval_steps': format verl does not take eval_steps; it takes "
        "reward_column, threshold, correct_column, tokenizer, correct_from, reward_weights, "
        "group_size",
    ),
    (
        {"format": "trl", "columns": COLUMNS},
        "config error at 'runs.r.columns': format trl does not take columns",
    ),
    (
        {"format": "trl", "reward_column": "accuracy_reward", "reward_weights": [1.0, 0.5]},
        "config error at 'runs.r.reward_weights': one weight per reward column: 2 weight(s) "
        "need a reward_column list of 2, got 'accuracy_reward'",
    ),
    (
        {"format": "generic", "columns": COLUMNS, "reward_weights": [1.0]},
        "config error at 'runs.r.reward_weights': one weight per reward column: 1 weight(s) "
        "need a reward_column list of 1, got 'reward'",
    ),
]


@pytest.mark.parametrize(("spec", "line"), REFUSED)
def test_a_run_spec_the_import_job_refuses_is_refused_at_dag_build(tmp_path, spec, line):
    spec = {**spec, "path": _runs(tmp_path)[spec["format"]]}
    got = _plan_line(spec, tmp_path)
    assert got is not None and got.startswith(line), got
    assert "\n" not in got
    with pytest.raises(ValueError):  # the job: the same spec on a real run of its format
        import_run(spec)


ACCEPTED = [
    {"format": "generic", "columns": COLUMNS},
    {"format": "generic", "columns": {**COLUMNS, "correct": "ok"}, "correct_from": "ok"},
    # reward_column fills a columns entry the mapping leaves out, as import_generic does
    {"format": "generic", "reward_column": "reward",
     "columns": {"step": "step", "prompt": "prompt", "response": "response"}},  # fmt: skip
    {"format": "trl", "eval_steps": 4, "reward_column": ["accuracy_reward"],
     "reward_weights": [2.0]},  # fmt: skip
    {"format": "verl", "correct_from": "reward", "threshold": 0.5},
    {"format": "verl", "optional": True},  # optional: the workflow's key, never the importer's
]


@pytest.mark.parametrize("spec", ACCEPTED)
def test_the_accepted_neighbours_plan_and_import(tmp_path, spec):
    spec = {**spec, "path": _runs(tmp_path)[spec["format"]]}
    assert _plan_line(spec, tmp_path) is None
    responses, _ = import_run({k: v for k, v in spec.items() if k != "optional"})
    assert len(responses) > 0

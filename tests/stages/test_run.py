"""Tests for grpo_dial.stages.run: a stage logs to its rule's log and fails cleanly."""

from __future__ import annotations

import logging
from types import SimpleNamespace

import pytest

from grpo_dial.stages.run import ATTEMPT_MARKER, ATTEMPTS_LOG, run_rule


class Named(dict):
    """Snakemake's input/output/params: a mapping with items()."""


def job(tmp_path, **params):
    return SimpleNamespace(
        input=Named(table=str(tmp_path / "in.csv")),
        output=Named(table=str(tmp_path / "out.csv")),
        params=Named(params),
        log=[str(tmp_path / "logs" / "rule.log")],
        threads=3,
    )


@pytest.fixture(autouse=True)
def restore_logging():
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    for handler in root.handlers:
        if handler not in handlers:
            handler.close()
    root.handlers, root.level = handlers, level


def test_a_stage_gets_plain_mappings_and_the_job_threads(tmp_path):
    seen = {}

    def stage(input, output, params):
        seen.update(input=input, output=output, params=params)
        logging.getLogger("grpo_dial").info("working on %s", input["table"])

    run_rule(stage, job(tmp_path, alpha=0.5))
    assert seen["params"] == {"alpha": 0.5, "threads": 3}
    assert seen["output"] == {"table": str(tmp_path / "out.csv")}
    assert "working on" in (tmp_path / "logs" / "rule.log").read_text()


def test_a_bad_input_is_one_line_in_the_log_and_a_failed_job(tmp_path):
    def stage(input, output, params):
        raise ValueError("config error at 'train.steps': -1 is less than the minimum of 1")

    with pytest.raises(SystemExit) as exit_info:
        run_rule(stage, job(tmp_path))
    assert exit_info.value.code == 1
    text = (tmp_path / "logs" / "rule.log").read_text()
    assert "stage: config error at 'train.steps'" in text and "Traceback" not in text


def test_a_bug_keeps_its_traceback(tmp_path):
    def stage(input, output, params):
        return {}["missing"]

    with pytest.raises(SystemExit):
        run_rule(stage, job(tmp_path))
    text = (tmp_path / "logs" / "rule.log").read_text()
    assert "stage failed:" in text and "Traceback" in text and "KeyError" in text


def test_the_log_is_appended_across_attempts_with_a_marker(tmp_path):
    """A killed attempt's log survives the rerun (which resumes), though Snakemake deletes the
    job's log before rerunning it; each attempt is marked."""

    def stage(input, output, params):
        logging.getLogger("grpo_dial").info("attempt with %s", params["alpha"])

    ckpt = str(tmp_path / "ckpt")
    run_rule(stage, job(tmp_path, alpha="first", checkpoint_dir=ckpt))
    (tmp_path / "logs" / "rule.log").unlink()  # what Snakemake does before a rerun
    run_rule(stage, job(tmp_path, alpha="second", checkpoint_dir=ckpt))
    for path in (tmp_path / "logs" / "rule.log", tmp_path / "ckpt" / ATTEMPTS_LOG):
        lines = path.read_text().splitlines()
        marks = [i for i, line in enumerate(lines) if line.startswith(ATTEMPT_MARKER)]
        assert len(marks) == 2 and marks[0] == 0, path
        assert "attempt with first" in "".join(lines[: marks[1]])
        assert "attempt with second" in "".join(lines[marks[1] :])
    run_rule(stage, job(tmp_path / "plain", alpha="no checkpoint"))  # other rules: the log only
    assert (tmp_path / "plain" / "logs" / "rule.log").read_text().startswith(ATTEMPT_MARKER)

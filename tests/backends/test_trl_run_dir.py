"""Which TRL checkpoint a trl-backend run resumes, and what happens to another run's folder."""

from __future__ import annotations

import json

import pytest

from grpo_dial.backends.trl.run import KEY, open_run_dir

pytest.importorskip("transformers")
OLD = {"config": {"lr": 0.0001, "group_size": 4}, "dial": {"eps": 0.0001}, "prompts": "abc"}


def written(tmp_path, key=OLD, checkpoints=(1, 2)):
    run_dir = tmp_path / "trl"
    for step in checkpoints:
        (run_dir / f"checkpoint-{step}").mkdir(parents=True)
    (run_dir / KEY).write_text(json.dumps(key))
    return run_dir


def test_the_same_run_resumes_from_its_newest_checkpoint(tmp_path):
    run_dir = written(tmp_path)
    assert open_run_dir(run_dir, OLD, "auto", steps=3).endswith("checkpoint-2")
    assert open_run_dir(run_dir, OLD, "auto", steps=2).endswith("checkpoint-2")


@pytest.mark.parametrize(
    ("key", "steps", "why"),
    [
        ({**OLD, "config": {"lr": 0.0002, "group_size": 4}}, 3, "train.lr: 0.0001 -> 0.0002"),
        ({**OLD, "prompts": "abd"}, 3, "the prompt pools"),
        (OLD, 1, "train.steps: 2 already done, 1 asked"),
    ],
)
def test_another_runs_folder_is_moved_aside_or_stops_a_strict_run(tmp_path, caplog, key, steps,
                                                                  why):  # fmt: skip
    run_dir = written(tmp_path)
    with pytest.raises(ValueError, match="belongs to another run") as err:
        open_run_dir(run_dir, key, "strict", steps)
    assert why in str(err.value) and "\n" not in str(err.value)
    assert (run_dir / "checkpoint-2").is_dir()  # strict: nothing moved
    assert open_run_dir(run_dir, key, "auto", steps) is None
    (aside,) = tmp_path.glob("trl-superseded-*")
    assert (aside / "checkpoint-2").is_dir() and why in caplog.text
    assert json.loads((run_dir / KEY).read_text()) == key and not list(run_dir.glob("check*"))


def test_a_folder_without_a_key_is_a_killed_start_and_is_replaced(tmp_path):
    run_dir = tmp_path / "trl"
    (run_dir / "checkpoint-1").mkdir(parents=True)  # no run_key.json: nothing to resume
    assert open_run_dir(run_dir, OLD, "auto", 3) is None
    assert not (run_dir / "checkpoint-1").exists() and (run_dir / KEY).is_file()

"""What stops a run (grpo_dial.train.guard): non-finite steps in a row, non-finite weights after
an update or before a checkpoint, each with one line and the last good checkpoint kept; and the
answer checker's failures, counted per step and warned about."""

from __future__ import annotations

import logging
import math
from dataclasses import replace

import pandas as pd
import pytest
import torch
from _rl_fixtures import FakeTask, one_thread  # noqa: F401

from grpo_dial.core import advantage
from grpo_dial.core.dial import preset
from grpo_dial.data.tasks.base import Verdict
from grpo_dial.train import checkpoint, resume
from grpo_dial.train import loop as trainer
from grpo_dial.train.config import TrainConfig
from grpo_dial.train.guard import CHECKER_COLUMNS
from grpo_dial.train.loop import train_run

CFG = TrainConfig(
    steps=4, prompts_per_step=3, group_size=4, max_new_tokens=8, train_pool=20,
    heldout_prompts=6, eval_every=2, checkpoint_every=2, identity_every=0, eval_samples=0,
    progress=False,
)  # fmt: skip
TABLES = ("steps", "responses")


def _run(base_dir, tmp, config=CFG, task=None, **kw):
    outputs = {name: tmp / f"{name}.parquet" for name in TABLES}
    train_run(base_dir, task or FakeTask(), preset("grpo"), config, outputs, tmp / "ckpt", **kw)
    return {name: pd.read_parquet(path) for name, path in outputs.items()}


def _nan_at(monkeypatch, steps: set[int]):
    real, calls = advantage.weighted_sum, []

    def loss(*args):
        calls.append(1)
        value = real(*args)
        return value * math.nan if len(calls) in steps else value

    monkeypatch.setattr(advantage, "weighted_sum", loss)


def test_only_consecutive_nonfinite_steps_stop_the_run(base_dir, tmp_path, monkeypatch):
    _nan_at(monkeypatch, {1, 3})  # two non-finite steps, never two in a row
    tables = _run(base_dir, tmp_path, replace(CFG, max_nonfinite_steps=2))
    assert tables["steps"]["nonfinite"].tolist() == [True, False, True, False]
    _nan_at(monkeypatch, {2, 3})
    with pytest.raises(ValueError) as err:
        _run(base_dir, tmp_path / "b", replace(CFG, max_nonfinite_steps=2))
    assert "\n" not in str(err.value)
    assert str(err.value).startswith(
        "stopping at step 3: 2 consecutive steps with a non-finite loss or gradient"
    )
    assert str(err.value).endswith(f"last good checkpoint {tmp_path / 'b' / 'ckpt' / 'last.pt'} "
                                   "(step 2) kept")  # fmt: skip


def test_nonfinite_weights_stop_the_run_and_the_last_good_checkpoint_resumes(
    base_dir, tmp_path, monkeypatch
):
    full = _run(base_dir, tmp_path / "full")
    real = trainer.policy_update

    def poisoned(model, *args, **kw):
        result = real(model, *args, **kw)
        if len(seen := poisoned.calls) == 2:  # the update of step 3 overflows a weight
            with torch.no_grad():
                next(model.parameters()).view(-1)[0] = math.inf
        seen.append(1)
        return result

    poisoned.calls = []
    monkeypatch.setattr(trainer, "policy_update", poisoned)
    with pytest.raises(ValueError) as err:
        _run(base_dir, tmp_path / "cut")
    last = tmp_path / "cut" / "ckpt" / "last.pt"
    assert str(err.value) == (
        f"stopping at step 3: the update left non-finite weights; last good checkpoint {last} "
        "(step 2) kept"
    )
    state = checkpoint.load_checkpoint(last)
    assert state["step"] == 2 and checkpoint.all_finite(state["model"].values())
    monkeypatch.undo()
    resumed = _run(base_dir, tmp_path / "cut")  # nothing finished was lost
    pd.testing.assert_frame_equal(
        full["steps"].drop(columns="wall_seconds"), resumed["steps"].drop(columns="wall_seconds")
    )


def test_nonfinite_state_is_never_checkpointed(base_dir, tmp_path):
    from grpo_dial.policy.model import load_policy

    model, tokenizer = load_policy(str(base_dir))
    task = FakeTask()
    pool, held = task.problems("train", 8, 0), task.problems("heldout", 4, 0)
    run = trainer.new_run(model, tokenizer, None, pool, held, preset("grpo"), CFG, None)
    path = tmp_path / "last.pt"
    resume.save(run, path, 1, "cpu")
    good = path.read_bytes()
    run.model.lm_head.weight.grad = torch.ones_like(run.model.lm_head.weight)
    run.optimizer.step()
    state = next(iter(run.optimizer.state.values()))
    state["exp_avg_sq"].view(-1)[0] = math.nan
    with pytest.raises(ValueError, match=r"step 2: non-finite weights or optimizer state; not "
                                         r"checkpointed, last good checkpoint .* \(step 1\) kept"):
        resume.save(run, path, 2, "cpu")  # fmt: skip
    assert path.read_bytes() == good


class CountingTask(FakeTask):
    """FakeTask whose verifier reports a timeout on every 5th check and a bad reference on
    every 7th (tallies as the math task's verify_counts)."""

    def __init__(self) -> None:
        self.counts = {"checks": 0, "timeouts": 0, "bad_references": 0, "errors": 0}

    def verify(self, problem, response, finished):
        self.counts["checks"] += 1
        n = self.counts["checks"]
        self.counts["timeouts"] += n % 5 == 0
        self.counts["bad_references"] += n % 7 == 0
        if n % 5 == 0 or n % 7 == 0:
            return Verdict(False, not finished, None)
        return super().verify(problem, response, finished)

    def verify_counts(self):
        return dict(self.counts)


def test_checker_failures_are_counted_per_step_and_warned(base_dir, tmp_path, caplog):
    task = CountingTask()
    with caplog.at_level(logging.INFO, logger="grpo_dial"):
        steps = _run(base_dir, tmp_path, replace(CFG, checker_warn_fraction=0.05), task=task)[
            "steps"
        ]
    assert steps["checker_timeouts"].sum() == task.counts["timeouts"] > 0
    assert steps["checker_bad_references"].sum() == task.counts["bad_references"] > 0
    assert steps["checker_errors"].sum() == steps["checker_crashes"].sum() == 0
    assert "the answer checker failed on" in caplog.text
    assert (
        f"answer checker over the run: timeouts {task.counts['timeouts']}, errors 0, crashes 0, "
        f"bad_references {task.counts['bad_references']}"
    ) in caplog.text
    plain = _run(base_dir, tmp_path / "plain")["steps"]  # a task without counts: zeros
    assert (plain[list(CHECKER_COLUMNS.values())] == 0).all().all()

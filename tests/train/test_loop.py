"""The RL run (train_run) on a tiny Llama and a fake task: silent groups never reach the loss,
resume equals the uninterrupted run, non-finite steps are skipped then stop the run, and the
tables, each against numbers computed another way."""

from __future__ import annotations

import logging
import math
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest
import torch
from _rl_fixtures import FakeTask, one_thread  # noqa: F401

from grpo_dial.core import advantage
from grpo_dial.core.advantage import group_stats
from grpo_dial.core.bands import PASS_RATE_BANDS, UNRATED
from grpo_dial.core.dial import preset
from grpo_dial.policy.model import load_policy
from grpo_dial.train import checkpoint
from grpo_dial.train import loop as trainer
from grpo_dial.train.config import TrainConfig
from grpo_dial.train.loop import table_columns, train_run

CFG = TrainConfig(
    steps=4, prompts_per_step=3, group_size=4, max_new_tokens=8, train_pool=20,
    heldout_prompts=10, eval_every=2, checkpoint_every=2, identity_every=2, identity_groups=2,
    progress=False,
)  # fmt: skip
TABLES = ("steps", "mass", "responses", "evals", "identity")


def _run(base_dir, tmp, dial, config=CFG, ckpt=None, **kw):
    outputs = {name: tmp / f"{name}.parquet" for name in TABLES}
    train_run(base_dir, FakeTask() if "task" not in kw else kw.pop("task"), dial, config,
              outputs, ckpt or tmp / "ckpt", **kw)  # fmt: skip
    return {name: pd.read_parquet(path) for name, path in outputs.items()}


# --------------------------------------------------------------------------- DAPO refill in the run


def test_train_run_never_passes_a_silent_group_to_the_loss(base_dir, tmp_path, monkeypatch):
    seen = []
    real = trainer.policy_update

    def spy(model, optimizer, train, adv, dial, config, ref_logp=None, lam=None):
        seen.append(train)
        return real(model, optimizer, train, adv, dial, config, ref_logp, lam)

    monkeypatch.setattr(trainer, "policy_update", spy)
    cfg = replace(CFG, prompts_per_step=5, identity_every=0)
    tables = _run(base_dir, tmp_path, preset("dapo"), cfg)
    task = FakeTask()
    assert len(seen) == cfg.steps
    for train in seen:  # rewards recomputed from the texts the loss saw
        r = torch.tensor(
            [
                float(task.verify(p, t, f).correct)
                for p, t, f in zip(
                    train.problems, train.texts, train.finished.tolist(), strict=True
                )
            ]
        )
        stats = group_stats(r, train.group_ids)
        assert ((stats.k > 0) & (stats.k < stats.size)).all()
    steps, responses = tables["steps"], tables["responses"]
    trained = responses[responses["trained"]]
    assert ((trained["k"] > 0) & (trained["k"] < trained["G"])).all()
    assert steps["samples"].tolist() == responses.groupby("step").size().tolist()
    refills = responses[responses["resample_round"] > 0].groupby("step")["prompt_id"].size()
    assert (steps.set_index("step")["resampled_prompts"] * cfg.group_size).reindex(
        refills.index
    ).tolist() == refills.tolist()
    assert steps["resampled_prompts"].sum() > 0


# --------------------------------------------------------------------------- resume


def test_resume_after_interruption_equals_uninterrupted(base_dir, tmp_path, caplog):
    dial = preset("dapo")
    full = _run(base_dir, tmp_path / "full", dial)

    def interrupt(step):
        if step == 3:
            raise KeyboardInterrupt("killed after step 3")

    with pytest.raises(KeyboardInterrupt):
        _run(base_dir, tmp_path / "cut", dial, callback=interrupt)
    assert checkpoint.load_checkpoint(tmp_path / "cut" / "ckpt" / "last.pt")["step"] == 2
    with caplog.at_level(logging.INFO, logger="grpo_dial"):
        resumed = _run(base_dir, tmp_path / "cut", dial)
    assert "resuming" in caplog.text
    for name in TABLES:
        a, b = full[name], resumed[name]
        if name == "steps":
            a, b = a.drop(columns="wall_seconds"), b.drop(columns="wall_seconds")
        pd.testing.assert_frame_equal(a, b, check_exact=True)
    sa = checkpoint.load_checkpoint(tmp_path / "full" / "ckpt" / "last.pt")
    sb = checkpoint.load_checkpoint(tmp_path / "cut" / "ckpt" / "last.pt")
    assert sa["step"] == sb["step"] == CFG.steps
    for name, tensor in sa["model"].items():
        assert torch.equal(tensor, sb["model"][name]), name

    # A finished run re-run only rewrites its tables.
    calls = []
    again = _run(base_dir, tmp_path / "full", dial, callback=calls.append)
    assert calls == [] and again["steps"].equals(full["steps"])
    # A checkpoint of another configuration is not resumed (and kept: tests/train/test_resume.py).
    with caplog.at_level(logging.WARNING, logger="grpo_dial"):
        other = _run(base_dir, tmp_path / "full", dial, config=replace(CFG, lr=1e-3))
    assert "belongs to another run (train.lr: 0.0001 -> 0.001)" in caplog.text
    assert other["steps"]["lr"].eq(1e-3).all() and len(other["steps"]) == CFG.steps


# --------------------------------------------------------------------------- non-finite


def test_nonfinite_step_is_skipped_then_run_stops(base_dir, tmp_path, monkeypatch, caplog):
    real = advantage.weighted_policy_loss
    calls = []

    def nan_first(*args):
        calls.append(1)
        loss = real(*args)
        return loss * math.nan if len(calls) == 1 else loss

    monkeypatch.setattr(advantage, "weighted_policy_loss", nan_first)
    cfg = replace(CFG, identity_every=0, checkpoint_every=1)
    base = load_policy(str(base_dir))[0].state_dict()
    after_step1 = {}

    def grab(step):
        if step == 1:
            after_step1.update(checkpoint.load_checkpoint(tmp_path / "ckpt" / "last.pt")["model"])

    with caplog.at_level(logging.WARNING, logger="grpo_dial"):
        tables = _run(base_dir, tmp_path, preset("grpo"), cfg, callback=grab)
    assert tables["steps"]["nonfinite"].tolist() == [True, False, False, False]
    assert "step 1: non-finite loss" in caplog.text
    for name, tensor in base.items():  # the skipped step left the weights alone
        assert torch.equal(after_step1[name], tensor), name

    monkeypatch.setattr(advantage, "weighted_policy_loss", lambda *a: real(*a) * math.nan)
    with pytest.raises(ValueError, match=r"step 2: 2 consecutive steps .*max_nonfinite_steps=2"):
        _run(base_dir, tmp_path / "b", preset("grpo"), replace(cfg, max_nonfinite_steps=2))


# --------------------------------------------------------------------------- tables


def test_tables_have_documented_columns_and_consistent_values(base_dir, tmp_path):
    cfg = replace(CFG, kl_coef=0.1, seed=1)  # a seed with informative groups at steps 2 and 4
    out = tmp_path / "model"
    outputs = {name: tmp_path / f"{name}.parquet" for name in TABLES} | {"model": out}
    train_run(base_dir, FakeTask(), preset("grpo"), cfg, outputs, tmp_path / "ckpt")
    t = {name: pd.read_parquet(outputs[name]) for name in TABLES}
    for name in TABLES:
        assert list(t[name].columns) == list(table_columns()[name]), name
    steps, resp, mass = t["steps"], t["responses"], t["mass"]
    assert steps["step"].tolist() == [1, 2, 3, 4] and not steps["nonfinite"].any()
    assert steps["kl"].iloc[0] == 0.0 and steps["kl"].iloc[1:].gt(0).all()  # base = policy at 1
    assert steps["samples"].eq(cfg.prompts_per_step * cfg.group_size).all()
    first = resp.groupby("step")
    assert np.allclose(steps["accuracy"], first["reward"].mean())
    assert np.allclose(steps["mean_len"], first["length"].mean())
    assert resp.loc[resp["work"].isna()].length.ge(0).all()  # the task's None split -> NaN
    assert sorted(t["evals"]["step"].unique()) == [0, 2, 4]
    assert set(t["evals"]["difficulty"]) == {"easy", "hard", "all"}
    assert set(t["evals"]["mode"]) == {"greedy", "sampled"}
    sampled = t["evals"][(t["evals"]["mode"] == "sampled") & (t["evals"]["difficulty"] == "all")]
    assert sampled["n"].eq(cfg.heldout_prompts * cfg.eval_samples).all()
    assert sorted(t["identity"]["step"].unique()) == [2, 4]
    assert (t["identity"]["seq_relative_residual"] < 1e-4).all()
    shares = mass.groupby("step")["share"].sum()
    assert np.allclose(shares, 1.0)
    assert set(mass["band"]) == {"easy", "hard"}
    model, _ = load_policy(str(out))
    state = checkpoint.load_checkpoint(tmp_path / "ckpt" / "last.pt")["model"]
    for name, tensor in model.state_dict().items():
        assert torch.equal(tensor, state[name])
    with pytest.raises(ValueError, match="unknown output"):
        train_run(base_dir, FakeTask(), preset("grpo"), cfg, {"stpes": "x.parquet"}, tmp_path)


def test_mass_by_pass_rate_band(base_dir, tmp_path):
    pool = FakeTask().problems("train", CFG.train_pool, CFG.pool_seed)
    p_hat = np.linspace(0, 1, len(pool) - 2)  # two prompts left out: "unrated"
    table = pd.DataFrame({"prompt_id": [p.prompt_id for p in pool[:-2]], "p_hat": p_hat})
    mass = _run(base_dir, tmp_path, preset("dr_grpo"), replace(CFG, identity_every=0),
                pass_rates=table)["mass"]  # fmt: skip
    assert set(mass["band"]) == {*PASS_RATE_BANDS, UNRATED}
    assert mass.groupby("step")["n_groups"].sum().eq(CFG.prompts_per_step).all()


def test_sampled_evaluation_does_not_change_the_run(base_dir, tmp_path):
    with_eval = _run(base_dir, tmp_path / "a", preset("grpo"), replace(CFG, eval_samples=3))
    without = _run(base_dir, tmp_path / "b", preset("grpo"), replace(CFG, eval_samples=0))
    pd.testing.assert_frame_equal(
        with_eval["steps"].drop(columns="wall_seconds"),
        without["steps"].drop(columns="wall_seconds"),
    )
    assert set(without["evals"]["mode"]) == {"greedy"}

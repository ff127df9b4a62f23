"""Adaptive group sizes: the allocator's budget and bounds, the running pass-rate estimate, and the
trainer with allocation (uniform reproduces the plain loop; adaptive resumes exactly)."""

from __future__ import annotations

import logging
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest
import torch
from _rl_fixtures import FakeTask, one_thread  # noqa: F401
from hypothesis import given, settings
from hypothesis import strategies as st

from grpo_dial.core import advantage, theory
from grpo_dial.core.allocation import Allocation
from grpo_dial.core.bands import PASS_RATE_BANDS
from grpo_dial.core.dial import preset
from grpo_dial.policy.model import load_policy
from grpo_dial.policy.rollout import generate_groups
from grpo_dial.train import checkpoint
from grpo_dial.train.allocation import allocate_groups
from grpo_dial.train.config import TrainConfig
from grpo_dial.train.loop import train_run
from grpo_dial.train.step import make_optimizer, policy_update, sampling_rngs

# --------------------------------------------------------------------------- the allocator

estimates = st.lists(st.floats(0.001, 0.999), min_size=1, max_size=24)


@settings(max_examples=150, deadline=None)
@given(
    p=estimates,
    data=st.data(),
    group_size=st.integers(1, 16),
    g_min=st.integers(1, 6),
    extra=st.integers(0, 40),
    signal=st.sampled_from(["grpo", "dr_grpo", "nonsilent"]),
    policy=st.sampled_from(["skip", "minimum"]),
)
def test_allocation_within_budget_and_bounds(p, data, group_size, g_min, extra, signal, policy):
    unanimous = np.array(data.draw(st.lists(st.booleans(), min_size=len(p), max_size=len(p))))
    g_max = g_min + extra
    sizes = allocate_groups(
        np.array(p), unanimous, group_size, allocation="adaptive", signal=signal,
        g_min=g_min, g_max=g_max, unanimous_policy=policy,
    )  # fmt: skip
    assert sizes.dtype == np.int64 and sizes.shape == (len(p),)
    assert sizes.sum() <= len(p) * group_size
    funded = sizes[sizes > 0]
    assert np.all((funded >= g_min) & (funded <= g_max))
    if policy == "skip" and not unanimous.all():
        assert np.all(sizes[unanimous] == 0)
    # With a budget that covers g_min for everyone, nobody interior goes unfunded, and the budget
    # is spent unless every interior prompt is at g_max.
    if len(p) * group_size >= g_min * len(p):
        interior = sizes[~unanimous]
        assert np.all(interior >= g_min)
        if not np.all(interior == g_max):
            assert sizes.sum() == len(p) * group_size


def test_uniform_allocation_is_group_size_everywhere():
    sizes = allocate_groups(np.array([0.01, 0.5, 0.99]), np.array([True, False, False]), 8)
    assert sizes.tolist() == [8, 8, 8]


def test_equal_estimates_split_the_budget_evenly():
    p = np.full(16, 0.3)
    sizes = allocate_groups(p, np.zeros(16, bool), 8, allocation="adaptive", g_max=32)
    assert sizes.tolist() == [8] * 16


def test_adaptive_moves_samples_to_hard_prompts_and_minimum_to_unanimous():
    p = np.array([0.5, 0.05, 0.5, 0.05, 0.02])
    unanimous = np.array([False, False, False, False, True])
    sizes = allocate_groups(p, unanimous, 8, allocation="adaptive", g_min=2, g_max=64)
    assert sizes[4] == 2 and sizes.sum() == 40
    assert sizes[1] > sizes[0] and sizes[3] > sizes[2]  # rarer successes need larger groups
    # The split maximizes the signal: no move of one sample between two prompts improves it.
    f = theory.expected_signal(p[:4], sizes[:4], "grpo").sum()
    for i in range(4):
        for j in range(4):
            if i != j and sizes[i] > 2:
                moved = sizes[:4].copy()
                moved[i] -= 1
                moved[j] += 1
                assert theory.expected_signal(p[:4], moved, "grpo").sum() <= f + 1e-12
    skipped = allocate_groups(
        p, unanimous, 8, allocation="adaptive", unanimous_policy="skip", g_max=64
    )
    assert skipped[4] == 0 and skipped.sum() == 40
    everyone_unanimous = allocate_groups(
        p, np.ones(5, bool), 8, allocation="adaptive", unanimous_policy="skip"
    )
    assert everyone_unanimous.tolist() == [2] * 5  # falls back to the minimum, never empty


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"allocation": "greedy"}, "allocation='greedy' is not valid"),
        ({"allocation": "adaptive", "unanimous_policy": "drop"}, "unanimous='drop'"),
        ({"allocation": "adaptive", "g_min": 5, "g_max": 3}, "g_min <= g_max"),
        ({"allocation": "adaptive", "signal": "ppo"}, "signal"),
    ],
)
def test_allocation_rejects_bad_settings(kwargs, message):
    with pytest.raises(ValueError, match=message):
        allocate_groups(np.array([0.5]), np.array([False]), 4, **kwargs)


# --------------------------------------------------------------------------- in the trainer

CFG = TrainConfig(
    steps=3, prompts_per_step=4, group_size=4, max_new_tokens=8, train_pool=12,
    heldout_prompts=6, eval_every=0, checkpoint_every=1, identity_every=0, eval_samples=0,
    progress=False,
)  # fmt: skip
TABLES = ("steps", "mass", "responses", "evals", "allocation")


def _run(base_dir, tmp, dial, config, **kw):
    outputs = {name: tmp / f"{name}.parquet" for name in (*TABLES, "model")}
    train_run(base_dir, FakeTask(), dial, config, outputs, tmp / "ckpt", **kw)
    frames = {name: pd.read_parquet(outputs[name]) for name in TABLES}
    return frames, load_policy(str(outputs["model"]), dtype="float32")[0]


def test_uniform_allocation_reproduces_the_plain_loop(base_dir, tmp_path):
    """The trainer (uniform) against a loop of the primitives with one integer G."""
    dial = preset("grpo")
    frames, trained = _run(base_dir, tmp_path, dial, CFG)
    model, tokenizer = load_policy(str(base_dir), dtype="float32")
    task = FakeTask()
    pool = task.problems("train", CFG.train_pool, CFG.pool_seed)
    torch.manual_seed(CFG.seed)
    rng, gen = sampling_rngs(CFG)
    optimizer = make_optimizer(model, CFG)
    for step in range(1, CFG.steps + 1):
        index = rng.permutation(len(pool))[: CFG.prompts_per_step]
        ro = generate_groups(
            model, tokenizer, [pool[i] for i in index], CFG.group_size, CFG.max_new_tokens,
            CFG.temperature, gen, record=CFG.activation_reuse_mb > 0,
        )  # fmt: skip
        rewards = torch.tensor(
            [float(task.verify(p, t, f).correct)
             for p, t, f in zip(ro.problems, ro.texts, ro.finished.tolist(), strict=True)]
        )  # fmt: skip
        adv = advantage.advantages(rewards, ro.group_ids, dial)
        result = policy_update(model, optimizer, ro, adv, dial, CFG)
        assert result.loss == frames["steps"]["loss"].iloc[step - 1]
        got = frames["responses"].query("step == @step")
        assert got["reward"].tolist() == rewards.tolist()
    for (name, p), q in zip(model.named_parameters(), trained.parameters(), strict=True):
        assert torch.equal(p, q), name
    alloc = frames["allocation"]
    assert alloc["G"].eq(CFG.group_size).all() and len(alloc) == CFG.steps * CFG.prompts_per_step


def test_adaptive_run_spends_the_budget_and_records_where(base_dir, tmp_path):
    config = replace(CFG, allocation=Allocation(scheme="adaptive", g_min=2, g_max=10), steps=4)
    table = pd.DataFrame(
        {"prompt_id": [p.prompt_id for p in FakeTask().problems("train", 12, 0)],
         "p_hat": np.tile([0.0, 0.05, 0.5, 0.9], 3), "n": 32}
    )  # fmt: skip
    frames, _ = _run(base_dir, tmp_path, preset("dr_grpo"), config, pass_rates=table)
    alloc, steps, responses = frames["allocation"], frames["steps"], frames["responses"]
    budget = config.prompts_per_step * config.group_size
    per_step = alloc.groupby("step")["G"].sum()
    assert (per_step <= budget).all() and per_step.eq(steps.set_index("step")["samples"]).all()
    funded = alloc["G"][alloc["G"] > 0]
    assert funded.between(2, 10).all()
    # A prompt estimated unanimous (p_hat 0 in the table, nothing else seen yet) gets g_min.
    first = alloc.query("step == 1")
    assert first.loc[first["unanimous"], "G"].eq(2).all()
    assert first["unanimous"].any() and first["G"].nunique() > 1
    # The responses table agrees: each group's G is what the allocation gave its prompt.
    g_resp = responses.groupby(["step", "group"]).agg(
        prompt_id=("prompt_id", "first"), G=("G", "first")
    )
    merged = g_resp.reset_index().merge(alloc, on=["step", "prompt_id"], suffixes=("", "_alloc"))
    assert merged["G"].eq(merged["G_alloc"]).all()
    assert set(alloc["band"]) <= set(PASS_RATE_BANDS)


def test_adaptive_resume_is_exact(base_dir, tmp_path, caplog):
    config = replace(
        CFG, allocation=Allocation(scheme="adaptive", decay=0.7), steps=4, checkpoint_every=1
    )
    dial = preset("grpo")
    full, m_full = _run(base_dir, tmp_path / "full", dial, config)

    def interrupt(step):
        if step == 2:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        _run(base_dir, tmp_path / "cut", dial, config, callback=interrupt)
    state = checkpoint.load_checkpoint(tmp_path / "cut" / "ckpt" / "last.pt")
    assert state["step"] == 2 and len(state["tracker"]) == 2
    with caplog.at_level(logging.INFO, logger="grpo_dial"):
        resumed, m_cut = _run(base_dir, tmp_path / "cut", dial, config)
    assert "resuming" in caplog.text
    for name in TABLES:
        a, b = full[name], resumed[name]
        if name == "steps":
            a, b = a.drop(columns="wall_seconds"), b.drop(columns="wall_seconds")
        pd.testing.assert_frame_equal(a, b, check_exact=True)
    assert full["allocation"]["G"].nunique() > 1  # the estimates did move the allocation
    for p, q in zip(m_full.parameters(), m_cut.parameters(), strict=True):
        assert torch.equal(p, q)

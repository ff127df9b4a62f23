"""The RL trainer on a tiny Llama and a fake task: the update, DAPO refill, resume, non-finite
steps, learning-rate matching and the tables, each against numbers computed another way."""

from __future__ import annotations

import copy
import logging
import math
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest
import torch
from _rl_fixtures import FakeTask, one_thread, tiny_policy  # noqa: F401

from grpo_dial.core import advantage
from grpo_dial.core.advantage import group_stats, preset
from grpo_dial.policy.model import load_policy
from grpo_dial.policy.rollout import response_logprobs
from grpo_dial.train import checkpoint
from grpo_dial.train import loop as trainer
from grpo_dial.train import records as rec
from grpo_dial.train.loop import COLUMNS, TrainConfig, lr_match_factor, train_run
from grpo_dial.train.step import policy_update, sample_batch, sampling_rngs, update_norm

CFG = TrainConfig(
    steps=4, prompts_per_step=3, group_size=4, max_new_tokens=8, train_pool=20,
    heldout_prompts=10, eval_every=2, checkpoint_every=2, identity_every=2, identity_groups=2,
    progress=False,
)  # fmt: skip
TABLES = ("steps", "mass", "responses", "evals", "identity")


class NeverRight(FakeTask):
    def verify(self, problem, response, finished):
        return super().verify(problem, "z", finished)


def _run(base_dir, tmp, dial, config=CFG, ckpt=None, **kw):
    outputs = {name: tmp / f"{name}.parquet" for name in TABLES}
    train_run(base_dir, FakeTask() if "task" not in kw else kw.pop("task"), dial, config,
              outputs, ckpt or tmp / "ckpt", **kw)  # fmt: skip
    return {name: pd.read_parquet(path) for name, path in outputs.items()}


def _batch(model, tokenizer, dial, config, task=None):
    task = task or FakeTask()
    pool = task.problems("train", config.train_pool, config.pool_seed)
    rng, gen = sampling_rngs(config)
    return sample_batch(model, tokenizer, task, pool, dial, config, rng, gen)


def _k(batch):
    stats = group_stats(batch.rewards, batch.group_ids)
    return stats.k, stats.size  # (M,), (M,)


# --------------------------------------------------------------------------- config


@pytest.mark.parametrize(
    "field, value, message",
    [
        ("optimizer", "adam", "choose one of adamw, sgd"),
        ("steps", 0, "steps must be an integer >= 1"),
        ("group_size", 2.0, "group_size must be an integer"),
        ("lr", -1.0, "lr must be a finite number > 0"),
        ("lr_scale", math.nan, "lr_scale must be a finite number"),
        ("grad_clip", 0.0, "grad_clip must be"),
        ("betas", (0.9,), "betas must be two numbers"),
        ("micro_batch", 0, "micro_batch must be an integer >= 1"),
        ("activation_reuse_mb", -1.0, "activation_reuse_mb must be a finite number >= 0"),
        ("kl_coef", -0.1, "kl_coef must be"),
        ("progress", "yes", "progress must be a bool"),
    ],
)
def test_config_rejects_bad_values(field, value, message):
    with pytest.raises(ValueError, match=message):
        TrainConfig(**{field: value})


def test_config_defaults_and_help():
    cfg = TrainConfig(betas=[0.8, 0.9])
    assert cfg.betas == (0.8, 0.9) and cfg.optimizer == "adamw" and cfg.kl_coef == 0.0
    assert all(f.metadata.get("help") for f in trainer.TrainConfig.__dataclass_fields__.values())


# --------------------------------------------------------------------------- the update


def test_one_sgd_step_is_minus_lr_grad_and_moves_logprobs_by_advantage_sign():
    dial = preset("grpo")
    cfg = replace(CFG, optimizer="sgd", lr=0.02, grad_clip=None, prompts_per_step=4)
    model, tokenizer = tiny_policy(seed=2)
    batch = _batch(model, tokenizer, dial, cfg)
    adv = advantage.advantages(batch.rewards, batch.group_ids, dial)[batch.trained]  # (B,)
    train = batch.rollouts.select(batch.trained)
    assert (adv > 0).any() and (adv < 0).any()

    # Expected step by hand: GRPO's loss -(1/B) sum_i A_i mean_t log pi(o_it), SGD.
    ref = copy.deepcopy(model)
    logp = response_logprobs(ref, train)  # (B, T)
    lens = train.response_mask.sum(1)  # (B,)
    loss = -(adv * logp.sum(1) / lens).mean()
    loss.backward()
    expected = {n: p.detach() - 0.02 * p.grad for n, p in ref.named_parameters()}

    before = response_logprobs(model, train).sum(1).detach()  # (B,)
    opt = trainer.make_optimizer(model, cfg)
    result = policy_update(model, opt, train, adv, dial, cfg)
    # At ratio 1 the surrogate's value is -(1/B) sum_i A_i; its gradient is the one above.
    assert result.finite and result.loss == pytest.approx(-float(adv.mean()), abs=1e-6)
    for name, p in model.named_parameters():
        torch.testing.assert_close(p.detach(), expected[name], rtol=1e-5, atol=1e-7)
    delta = response_logprobs(model, train).sum(1).detach() - before  # (B,)
    # Shared parameters couple the responses, so single ones may move against their sign; on
    # average the positive ones go up and the negative ones down, and to first order
    # sum_i (A_i / |o_i|) delta_i / B = lr ||g||^2 exactly.
    assert delta[adv > 0].mean() > 0 and delta[adv < 0].mean() < 0
    assert (torch.sign(delta[adv != 0]) == torch.sign(adv[adv != 0])).float().mean() >= 0.75
    g2 = sum(float(p.grad.pow(2).sum()) for p in ref.parameters())
    assert float((adv * delta / lens).mean()) == pytest.approx(0.02 * g2, rel=0.1)


def test_second_update_uses_the_sampling_policy_as_old():
    dial = replace(preset("grpo"), clip_low=0.05, clip_high=0.05)
    cfg = replace(CFG, optimizer="sgd", lr=0.5, grad_clip=None, updates_per_batch=2)
    model, tokenizer = tiny_policy(seed=2)
    batch = _batch(model, tokenizer, dial, cfg)
    adv = advantage.advantages(batch.rewards, batch.group_ids, dial)[batch.trained]
    train = batch.rollouts.select(batch.trained)

    ref = copy.deepcopy(model)
    old = response_logprobs(ref, train).detach()
    for _ in range(2):  # both updates against the same old log-probs (ratio != 1 the 2nd time)
        ref.zero_grad()
        advantage.policy_loss(response_logprobs(ref, train), old, adv, train.response_mask,
                              dial).backward()  # fmt: skip
        with torch.no_grad():
            for p in ref.parameters():
                p -= 0.5 * p.grad
    policy_update(model, trainer.make_optimizer(model, cfg), train, adv, dial, cfg)
    for p, q in zip(model.parameters(), ref.parameters(), strict=True):
        torch.testing.assert_close(p, q, rtol=1e-5, atol=1e-6)


def test_first_update_reuses_the_samplers_projections_within_the_budget(monkeypatch):
    """The batch keeps the sampler's projection outputs when they fit activation_reuse_mb
    (also across DAPO refill rounds), and the update taken with them equals the recomputed one."""
    from grpo_dial.policy import lean_llama, rollout
    from grpo_dial.policy.rollout import Rollouts

    monkeypatch.setattr(rollout, "COMPACT_AT", 2.0)  # rows stay in the decode batch: all recorded

    model, tokenizer = tiny_policy(seed=4)
    size = lean_llama.recorded_bytes(model, CFG.prompts_per_step * CFG.group_size, 7) / 2**20
    for budget, kept in ((0.0, False), (size * 0.99, False), (size, True)):
        cfg = replace(CFG, activation_reuse_mb=budget)
        assert (_batch(model, tokenizer, preset("grpo"), cfg).rollouts.recorded is not None) == kept
    model, tokenizer = tiny_policy(seed=0)  # a seed with refills (as the DAPO test below)
    dapo, cfg = preset("dapo"), replace(CFG, prompts_per_step=6)
    batch = _batch(model, tokenizer, dapo, cfg)
    assert batch.rounds.max() > 0 and batch.rollouts.recorded is not None
    adv = advantage.advantages(batch.rewards, batch.group_ids, dapo)[batch.trained]
    train = batch.rollouts.select(batch.trained)
    plain = copy.deepcopy(model)  # another model: the record applies only to `model`
    used = []
    known = lean_llama._known_projector
    monkeypatch.setattr(lean_llama, "_known_projector", lambda k, h: used.append(1) or known(k, h))
    results = []
    for m, rollouts in ((model, train), (plain, Rollouts(**{**train.__dict__, "recorded": None}))):
        out = policy_update(m, trainer.make_optimizer(m, cfg), rollouts, adv, dapo, cfg)
        results.append((out, list(m.parameters())))
        assert bool(used) == (m is model)
        used.clear()
    (a, pa), (b, pb) = results
    assert a.loss == pytest.approx(b.loss, rel=1e-5, abs=1e-7)
    assert a.grad_norm == pytest.approx(b.grad_norm, rel=1e-4)
    for p, q in zip(pa, pb, strict=True):
        torch.testing.assert_close(p, q, rtol=1e-5, atol=1e-6)


# --------------------------------------------------------------------------- DAPO refill


def test_dapo_refill_trains_only_informative_groups_and_counts_samples():
    model, tokenizer = tiny_policy(seed=0)
    cfg = replace(CFG, prompts_per_step=6)
    dapo = _batch(model, tokenizer, preset("dapo"), cfg)
    grpo = _batch(model, tokenizer, preset("grpo"), cfg)
    k, size = _k(dapo)
    informative = (k > 0) & (k < size)  # (M,)
    assert (~informative).any() and dapo.resampled_prompts > 0, "seed must produce refills"
    stats = group_stats(dapo.rewards, dapo.group_ids)
    assert torch.equal(dapo.trained, informative[stats.index])
    assert int(informative.sum()) <= cfg.prompts_per_step
    assert len(dapo.rollouts) == cfg.group_size * (cfg.prompts_per_step + dapo.resampled_prompts)
    assert int((dapo.rounds > 0).sum()) == cfg.group_size * dapo.resampled_prompts
    # Round 0 is the same draw every dial sees; a keep-dial trains on all of it.
    n0 = int((dapo.rounds == 0).sum())
    assert dapo.rollouts.texts[:n0] == grpo.rollouts.texts and grpo.trained.all()


def test_dapo_counts_every_round_when_nothing_is_informative():
    model, tokenizer = tiny_policy(seed=0)
    dial = replace(preset("dapo"), max_resample_rounds=2)
    batch = _batch(model, tokenizer, dial, CFG, task=NeverRight())
    assert not batch.trained.any()
    assert batch.resampled_prompts == 2 * CFG.prompts_per_step
    assert len(batch.rollouts) == 3 * CFG.prompts_per_step * CFG.group_size
    assert sorted(set(batch.rounds.tolist())) == [0, 1, 2]
    records = rec.new_records()
    result = trainer.UpdateResult(math.nan, math.nan, math.nan, True)
    adv = torch.zeros(len(batch.rollouts))
    rec.record_step(records, 1, batch, adv, result, dial, {}, ("easy", "hard"), 1e-3, 0.0)
    assert records["mass"][0]["n_groups"] == [0, 0] and np.isnan(records["mass"][0]["share"]).all()
    assert records["steps"][0]["samples"] == [len(batch.rollouts)]
    assert records["steps"][0]["trained_groups"] == [0]


def test_train_run_never_passes_a_silent_group_to_the_loss(base_dir, tmp_path, monkeypatch):
    seen = []
    real = trainer.policy_update

    def spy(model, optimizer, train, adv, dial, config, ref_logp=None):
        seen.append(train)
        return real(model, optimizer, train, adv, dial, config, ref_logp)

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
    # A checkpoint of another configuration is not resumed.
    with caplog.at_level(logging.WARNING, logger="grpo_dial"):
        other = _run(base_dir, tmp_path / "full", dial, config=replace(CFG, lr=1e-3))
    assert "belongs to another run" in caplog.text
    assert other["steps"]["lr"].eq(1e-3).all() and len(other["steps"]) == CFG.steps


# --------------------------------------------------------------------------- non-finite


def test_nonfinite_step_is_skipped_then_run_stops(base_dir, tmp_path, monkeypatch, caplog):
    real = advantage.policy_loss
    calls = []

    def nan_first(*args):
        calls.append(1)
        loss = real(*args)
        return loss * math.nan if len(calls) == 1 else loss

    monkeypatch.setattr(advantage, "policy_loss", nan_first)
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

    monkeypatch.setattr(advantage, "policy_loss", lambda *a: real(*a) * math.nan)
    with pytest.raises(ValueError, match=r"stopping at step 2: 2 steps .*max_nonfinite_steps=2"):
        _run(base_dir, tmp_path / "b", preset("grpo"), replace(cfg, max_nonfinite_steps=2))


# --------------------------------------------------------------------------- lr matching


def test_update_norm_sgd_is_lr_times_grad_norm_and_leaves_model_alone():
    model, tokenizer = tiny_policy(seed=2)
    state = copy.deepcopy(model.state_dict())
    cfg = replace(CFG, optimizer="sgd", lr=0.1, grad_clip=None, prompts_per_step=6)
    norms = {}
    for name in ("grpo", "dr_grpo"):
        dial = preset(name)
        batch = _batch(model, tokenizer, dial, cfg)
        adv = advantage.advantages(batch.rewards, batch.group_ids, dial)[batch.trained]
        train = batch.rollouts.select(batch.trained)
        ref = copy.deepcopy(model)
        advantage.policy_loss(*(lambda lp: (lp, lp.detach()))(response_logprobs(ref, train)),
                              adv, train.response_mask, dial).backward()  # fmt: skip
        grad = math.sqrt(sum(float(p.grad.double().pow(2).sum()) for p in ref.parameters()))
        norms[name] = update_norm(model, batch, dial, cfg)
        assert norms[name] == pytest.approx(0.1 * grad, rel=1e-4)
    for name, tensor in model.state_dict().items():
        assert torch.equal(tensor, state[name])
    assert lr_match_factor(norms["grpo"], norms["dr_grpo"]) > 5  # sigma vs sigma^2 / L_max


def test_update_norm_adam_is_nearly_scale_free():
    model, tokenizer = tiny_policy(seed=2)
    cfg = replace(CFG, lr=1e-3, grad_clip=None, prompts_per_step=6)
    norms = {}
    for name in ("grpo", "dr_grpo"):
        batch = _batch(model, tokenizer, preset(name), cfg)
        norms[name] = update_norm(model, batch, preset(name), cfg)
    n_params = sum(p.numel() for p in model.parameters())
    # First AdamW step ~ lr sign(g): norm ~ lr sqrt(#params), whatever the gradient's scale.
    assert norms["grpo"] == pytest.approx(1e-3 * math.sqrt(n_params), rel=0.1)
    assert lr_match_factor(norms["grpo"], norms["dr_grpo"]) == pytest.approx(1.0, abs=0.05)
    assert trainer.calibration_update_norm(
        model, tokenizer, FakeTask(), preset("grpo"), cfg
    ) == pytest.approx(norms["grpo"], rel=1e-12)


@pytest.mark.parametrize("bad", [0.0, -1.0, math.nan, math.inf])
def test_lr_match_factor_rejects(bad):
    assert lr_match_factor(2.0, 0.5) == 4.0
    with pytest.raises(ValueError, match="arm_norm must be a finite number > 0"):
        lr_match_factor(1.0, bad)


# --------------------------------------------------------------------------- tables


def test_tables_have_documented_columns_and_consistent_values(base_dir, tmp_path):
    cfg = replace(CFG, kl_coef=0.1)
    out = tmp_path / "model"
    outputs = {name: tmp_path / f"{name}.parquet" for name in TABLES} | {"model": out}
    train_run(base_dir, FakeTask(), preset("grpo"), cfg, outputs, tmp_path / "ckpt")
    t = {name: pd.read_parquet(outputs[name]) for name in TABLES}
    for name in TABLES:
        assert list(t[name].columns) == list(COLUMNS[name]), name
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
    assert set(mass["band"]) == {*rec.PASS_RATE_BANDS, rec.UNRATED}
    assert mass.groupby("step")["n_groups"].sum().eq(CFG.prompts_per_step).all()


def test_pass_rate_band_edges_and_group_mass_hand_numbers():
    p = np.array([0, 0.05, 0.1, 0.2, 0.4, 0.5, 0.6, 0.7, 0.9, 0.95, 1])
    assert rec.pass_rate_band(p).tolist() == [
        "never", "extreme", "other", "other", "medium", "medium", "medium", "other", "other",
        "extreme", "always",
    ]  # fmt: skip
    rewards = torch.tensor([1.0, 0, 0, 0, 1, 1, 0, 0, 1, 1, 1, 1, 1.0])
    gids = torch.tensor([0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3])  # k=1, k=2, silent, singleton
    s1, s2 = math.sqrt(3) / 4, 0.5
    for name, expected in [("grpo", [s1, s2, 0, 0]), ("dr_grpo", [s1**2, s2**2, 0, 0])]:
        dial = replace(preset(name), eps=0.0)
        _, mass = rec.group_mass(rewards, gids, dial)
        assert mass.tolist() == pytest.approx(expected, abs=1e-12)
    chunk = rec.mass_chunk(3, ["a", "b", "a", "b"], np.array([s1, s2, 0, 0]), ("a", "b", "c"))
    assert chunk["n_groups"] == [2, 2, 0]
    assert chunk["share"] == pytest.approx([s1 / (s1 + s2), s2 / (s1 + s2), 0.0])
    stats = rec.step_stats(rewards, gids, np.arange(13), torch.zeros(13, dtype=torch.bool),
                           np.full(13, np.nan), np.ones(13))  # fmt: skip
    assert stats["accuracy"] == pytest.approx(8 / 13)
    assert stats["silent_fraction"] == 0.5 and stats["all_correct_fraction"] == 0.5
    assert stats["all_wrong_fraction"] == 0.0 and math.isnan(stats["mean_work_correct"])
    assert stats["mean_len_incorrect"] == pytest.approx(np.mean([1, 2, 3, 6, 7]))


def test_sampled_evaluation_does_not_change_the_run(base_dir, tmp_path):
    with_eval = _run(base_dir, tmp_path / "a", preset("grpo"), replace(CFG, eval_samples=3))
    without = _run(base_dir, tmp_path / "b", preset("grpo"), replace(CFG, eval_samples=0))
    pd.testing.assert_frame_equal(
        with_eval["steps"].drop(columns="wall_seconds"),
        without["steps"].drop(columns="wall_seconds"),
    )
    assert set(without["evals"]["mode"]) == {"greedy"}

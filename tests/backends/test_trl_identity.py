"""The identity probe on the trl backend: TRL's batch read back as the own probe reads the own
sampler's (equal rows), and a real trl run's table, checked against its responses table, the
closed forms of the probe and the base weights it must see at step 1 (on-policy)."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest
import torch
from _rl_fixtures import FakeTask, informative_batch, one_thread, save_tiny, tiny_policy  # noqa: F401

from grpo_dial.backends.trl.identity import IdentityProbe, identity_table, trl_rollouts
from grpo_dial.core.dial import read_arm
from grpo_dial.policy.rollout import eos_ids
from grpo_dial.train.config import TrainConfig
from grpo_dial.train.probe import IDENTITY_COLUMNS, identity_probe

TRL_GRPO = {"preset": "grpo", "std_ddof": 1, "eps": 1e-4}
DIALS = {  # one per loss_type the trl backend uses
    "grpo": TRL_GRPO,
    "dapo": {"preset": "dapo", "silent": "keep", "std_ddof": 1, "eps": 1e-4},
    "dr_grpo": {"preset": "dr_grpo"},
}
G, MAX_NEW = 4, 6


def dial(name: str, max_new_tokens: int = MAX_NEW):
    return read_arm(DIALS[name], max_new_tokens=max_new_tokens).dial


def as_trl(rollouts) -> dict:
    """The own sampler's batch in the form TRL's _generate_and_score_completions returns it."""
    return {
        "prompt_ids": rollouts.prompt_ids,
        "prompt_mask": rollouts.prompt_mask,
        "completion_ids": rollouts.response_ids,
        "completion_mask": rollouts.response_mask.int(),
    }


@pytest.mark.parametrize("name", list(DIALS))
def test_trls_batch_gives_the_own_probes_rows(name):
    torch.manual_seed(0)
    model, tokenizer = tiny_policy(seed=1)
    batch, rewards = informative_batch(model, tokenizer, n_problems=8, group_size=G, seed=3)
    arm = dial(name, max_new_tokens=8)
    eos = set(eos_ids(model, tokenizer))
    read = trl_rollouts(as_trl(batch), batch.problems, G, eos, tokenizer)
    assert torch.equal(read.group_ids, batch.group_ids)
    assert torch.equal(read.finished, batch.finished) and read.texts == batch.texts

    probe = IdentityProbe(arm, 2, 3, G, batch.problems, rewards.tolist, eos, tokenizer)
    inputs = [{"idx": i} for i in range(len(batch))]
    probe.measure(model, 2, inputs, as_trl(batch))
    own = identity_probe(model, batch, rewards, arm, 3, 2)
    assert len(own) > 0
    pd.testing.assert_frame_equal(identity_table(probe.rows), own, rtol=1e-12)
    assert probe.seconds[2] > 0  # left out of the step's wall seconds


def test_a_batch_that_is_not_whole_groups_is_refused():
    model, tokenizer = tiny_policy()
    batch, _ = informative_batch(model, tokenizer, n_problems=2, group_size=G)
    with pytest.raises(ValueError, match="8 completions for 7 problems in groups of 4"):
        trl_rollouts(as_trl(batch), batch.problems[:7], G, {2}, tokenizer)


# ------------------------------------------------------------------- a real run on the trl backend


CONFIG = TrainConfig(steps=2, prompts_per_step=4, group_size=G, max_new_tokens=MAX_NEW,
                     eval_every=2, heldout_prompts=4, checkpoint_every=2, train_pool=8,
                     identity_every=1, identity_groups=4, progress=False,
                     eval_samples=0)  # fmt: skip
TABLES = ("steps", "responses", "mass", "evals", "identity", "allocation")


def trl_run(base, root, name, config=CONFIG, spy=None):
    """Train arm `name` on the trl backend from `base` into root/name; spy(model, step) sees
    the model each time the probe measures."""
    from grpo_dial.backends.trl import identity as trl_identity
    from grpo_dial.backends.trl.run import trl_train

    outputs = {n: root / name / f"{n}.parquet" for n in TABLES}
    measure = trl_identity.IdentityProbe.measure

    def spying(self, model, step, inputs, output):
        spy(model, step)
        measure(self, model, step, inputs, output)

    patch = pytest.MonkeyPatch()
    if spy is not None:
        patch.setattr(trl_identity.IdentityProbe, "measure", spying)
    try:
        trl_train(base, FakeTask(), dial(name), config, outputs, root / name / "ckpt")
    finally:
        patch.undo()
    return {n: pd.read_parquet(p) for n, p in outputs.items()}


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    pytest.importorskip("trl")
    root = tmp_path_factory.mktemp("trl_identity")
    save_tiny(root / "base")
    base = {k: v.clone() for k, v in tiny_policy()[0].state_dict().items()}
    seen = {}  # step -> the probed weights equal the base policy's

    def spy(model, step):
        now = model.state_dict()
        seen[step] = all(torch.equal(now[k].cpu(), v) for k, v in base.items())

    out = {name: trl_run(root / "base", root, name, spy=spy if name == "grpo" else None)
           for name in DIALS}  # fmt: skip
    return root, out, seen


def test_the_table_is_measured_before_each_update(runs):
    _, out, seen = runs
    assert seen == {1: True, 2: False}  # step 1: the base policy that sampled it; 2: updated
    identity = out["grpo"]["identity"]
    assert list(identity.columns) == IDENTITY_COLUMNS and len(identity) > 0
    assert set(identity["step"]) <= {1, 2}


@pytest.mark.parametrize("name", list(DIALS))
def test_each_row_agrees_with_the_responses_table_and_the_closed_forms(runs, name):
    _, out, _ = runs
    identity, responses = out[name]["identity"], out[name]["responses"]
    assert len(identity) > 0
    arm = dial(name)
    for _, row in identity.iterrows():
        group = responses[(responses["step"] == row["step"]) & (responses["group"] == row["group"])]
        assert (group["prompt_id"] == row["prompt_id"]).all() and len(group) == row["G"] == G
        k = int(group["reward"].sum())
        assert row["k"] == k and 0 < k < G
        correct = group["reward"] == 1
        assert row["mean_len_correct"] == pytest.approx(group.loc[correct, "tokens"].mean())
        assert row["mean_len_incorrect"] == pytest.approx(group.loc[~correct, "tokens"].mean())
        p = k / G
        sigma_p = math.sqrt(p * (1 - p))
        if arm.std_power == 1:  # TRL's sample std plus 1e-4
            factor = sigma_p**2 / (sigma_p * math.sqrt(G / (G - 1)) + 1e-4)
        else:
            factor = sigma_p**2
        assert row["sigma"] == pytest.approx(sigma_p) and row["factor"] == pytest.approx(factor)
        # the token-level closed forms of grpo_dial.train.probe (token and constant normalizers)
        if arm.length_norm == "token":
            assert row["token_norm_ratio"] == pytest.approx(G / group["tokens"].sum(), rel=1e-5)
        if arm.length_norm == "constant":
            assert row["token_norm_ratio"] == pytest.approx(1 / MAX_NEW, rel=1e-5)
        if arm.length_norm != "sequence":
            assert row["token_cosine"] == pytest.approx(1.0, abs=1e-6)
    assert (identity["length_norm"] == arm.length_norm).all()
    assert identity["seq_relative_residual"].max() < 1e-6
    assert identity["token_cosine"].between(-1 - 1e-9, 1 + 1e-9).all()
    assert np.isfinite(out[name]["steps"]["wall_seconds"]).all()


def test_the_probe_leaves_trls_run_unchanged(runs):
    root, out, _ = runs
    plain = trl_run(root / "base", root / "plain", "grpo", replace(CONFIG, identity_every=0))
    assert plain["identity"].empty and list(plain["identity"].columns) == IDENTITY_COLUMNS
    cols = ["step", "group", "prompt_id", "reward", "tokens", "advantage"]
    pd.testing.assert_frame_equal(plain["responses"][cols], out["grpo"]["responses"][cols])

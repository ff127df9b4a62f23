"""A trl-backend run that learns: TRL's GRPOTrainer on the fake task, whose untrained tiny policy
already answers some prompts right and some wrong (mixed groups), with updates_per_batch 2.

It checks what the smoke chain's silent runs cannot: the weights move, and the held-out accuracy
(64 samples on each of 16 prompts the run never trains on) rises beyond its seed noise, measured
with the same 5 sampling seeds on the base and the trained policy; non-zero gradient norms,
identity rows at the steps with an informative group, finite correct-side lengths and
decomposition terms; and that updates_per_batch 2 draws `steps` batches (TRL's max_steps counts
optimizer steps), each the own trainer's step in every table, checkpoint and callback."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
import torch
from _rl_fixtures import FakeTask, one_thread, save_tiny  # noqa: F401 (autouse)

from grpo_dial.analysis.training.decompose import decompose
from grpo_dial.core.dial import dial_from_config
from grpo_dial.train.config import TrainConfig

pytest.importorskip("trl")
CONFIG = TrainConfig(steps=3, prompts_per_step=4, group_size=4, max_new_tokens=6, eval_every=2,
                     heldout_prompts=4, checkpoint_every=1, train_pool=12, progress=False,
                     eval_samples=0, identity_every=1, identity_groups=2, updates_per_batch=2,
                     lr=0.01, seed=5)  # fmt: skip
DIAL = {"preset": "dapo", "silent": "keep", "std_ddof": 1, "eps": 1e-4}
TABLES = ("steps", "responses", "mass", "evals", "identity", "allocation")


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    from grpo_dial.backends.trl.run import trl_train

    root = tmp_path_factory.mktemp("trl_learns")
    save_tiny(root / "base")
    saved = []
    outputs = {n: root / f"{n}.parquet" for n in TABLES}
    with_model = {**outputs, "model": root / "final"}
    trl_train(root / "base", FakeTask(), dial_from_config(DIAL), CONFIG, with_model, root / "ckpt",
              callback=saved.append)  # fmt: skip
    tables = {n: pd.read_parquet(p) for n, p in outputs.items()}
    return root, tables, saved


def heldout_accuracy(model_dir, seed: int) -> float:
    """Accuracy of 64 sampled responses (temperature 1, the run's max_new_tokens) on each of 16
    held-out prompts of the fake task (split 'measure', not the run's pool or held-out set)."""
    from grpo_dial.policy.model import load_policy
    from grpo_dial.policy.rollout import generate_groups

    task = FakeTask()
    problems = task.problems("measure", 16, 0)
    model, tokenizer = load_policy(str(model_dir), "cpu", "float32")
    rollouts = generate_groups(model.eval(), tokenizer, problems, 64, CONFIG.max_new_tokens, 1.0,
                               torch.Generator().manual_seed(seed))  # fmt: skip
    triples = zip(rollouts.problems, rollouts.texts, rollouts.finished.tolist(), strict=True)
    verdicts = [task.verify(p, t, f).correct for p, t, f in triples]
    return float(np.mean(verdicts))


def test_the_weights_move_and_heldout_accuracy_rises_beyond_its_seed_noise(run):
    """lr 0 (or an update that never reaches the weights) fails both: the weights equal the
    base's and each seed's accuracy is the base's."""
    from safetensors.torch import load_file

    root, _, _ = run
    base, final = load_file(root / "base" / "model.safetensors"), load_file(
        root / "final" / "model.safetensors")  # fmt: skip
    assert base.keys() == final.keys()
    assert max(float((final[n] - base[n]).abs().max()) for n in base) > 1e-3
    seeds = range(5)
    before = np.array([heldout_accuracy(root / "base", s) for s in seeds])
    after = np.array([heldout_accuracy(root / "final", s) for s in seeds])
    noise = before.std(ddof=1)  # the measure's spread over sampling seeds, at the base
    assert 0.1 < before.mean() < 0.9  # the base is mixed: neither side saturated
    assert (after - before).min() > 3 * noise, (before, after)  # every seed, paired


def test_updates_per_batch_2_draws_steps_batches_numbered_as_the_own_trainer(run):
    root, tables, saved = run
    responses = tables["responses"]
    n = CONFIG.prompts_per_step * CONFIG.group_size
    assert responses.groupby("step").size().to_dict() == {1: n, 2: n, 3: n}
    assert list(tables["steps"]["step"]) == [1, 2, 3]
    assert tables["steps"]["wall_seconds"].gt(0).all()
    assert sorted(set(tables["evals"]["step"])) == [0, 2, 3]
    assert saved == [1, 2, 3]  # the callback after each batch's checkpoint, by batch
    folders = sorted(p.name for p in (root / "ckpt" / "trl").glob("checkpoint-*"))
    assert folders == ["checkpoint-4", "checkpoint-6"]  # optimizer steps 2 x 2, 2 x 3; 2 kept
    # each step its own sampled batch: the responses differ between steps
    texts = responses.groupby("step")["tokens"].apply(tuple)
    assert len(set(texts)) == 3


def test_the_run_learns_gradients_identity_and_correct_side_terms(run):
    _, tables, _ = run
    steps, responses = tables["steps"], tables["responses"]
    k = responses.groupby(["step", "group"])["k"].first()
    informative = k[(k > 0) & (k < CONFIG.group_size)]
    assert len(informative) > 0  # mixed groups: something to learn from
    assert steps["grad_norm"].gt(0).all() and np.isfinite(steps["loss"]).all()
    assert steps["mean_len_correct"].notna().all() and steps["mean_len_incorrect"].notna().all()
    assert steps["silent_fraction"].lt(1).all()
    # the identity rows: at every step with an informative group, on those groups
    identity = tables["identity"]
    assert sorted(set(identity["step"])) == sorted(set(informative.index.get_level_values(0)))
    assert np.isfinite(identity.select_dtypes("number").to_numpy()).any(axis=1).all()
    # the decomposition of the length change, first step against last: finite on both sides
    terms = decompose(responses, [1], [3], length="tokens")
    for q in ("total", "mix", "within_correct", "within_incorrect", "Lc0", "Lc1", "Lw0", "Lw1"):
        assert math.isfinite(terms[q]), q
    parts = terms[["mix", "within_correct", "within_incorrect"]].sum()
    assert parts == pytest.approx(terms["total"], abs=1e-9)
    mass = tables["mass"]
    assert len(mass) > 0 and set(mass["step"]) <= {1, 2, 3}

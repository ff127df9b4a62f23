"""The trl backend's steps table `kl` when a batch is reused (updates_per_batch > 1, kl_coef > 0).

TRL logs one entry per optimizer step, `updates_per_batch` of them per sampled batch; the own
trainer's `kl` is the KL to the base at the batch's first update (the policy that sampled it),
so the table takes the first entry's, and the mean of the entries' loss and grad_norm. By hand:
a log of 2 batches x 3 updates. On a run: the first batch's first update is the base itself, so
its KL is 0 while its later updates' are not (any other reading fails); a later batch's is
TRL's entry at that batch's first optimizer step in the trainer_state.json TRL writes."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest
from _rl_fixtures import FakeTask, one_thread, save_tiny  # noqa: F401 (autouse)

from grpo_dial.core.dial import dial_from_config
from grpo_dial.train.config import TrainConfig

pytest.importorskip("trl")
UPDATES = 3
CONFIG = TrainConfig(steps=2, prompts_per_step=4, group_size=4, max_new_tokens=6, eval_every=10,
                     heldout_prompts=2, checkpoint_every=1, train_pool=12, progress=False,
                     eval_samples=0, identity_every=0, updates_per_batch=UPDATES, kl_coef=0.1,
                     lr=0.05, seed=3)  # fmt: skip
DIAL = {"preset": "dapo", "silent": "keep", "std_ddof": 1, "eps": 1e-4}


def test_a_reused_batch_reports_its_first_updates_kl_and_lr_and_the_mean_loss_by_hand():
    from grpo_dial.backends.trl.tables import _history

    log = [  # TRL's log_history: optimizer steps 1-6, 3 per batch, and a non-loss entry
        {"step": 1, "loss": 0.3, "grad_norm": 1.0, "learning_rate": 0.5, "kl": 0.0},
        {"step": 2, "loss": 0.6, "grad_norm": 2.0, "learning_rate": 0.4, "kl": 0.2},
        {"step": 3, "loss": 0.9, "grad_norm": 6.0, "learning_rate": 0.3, "kl": 0.7},
        {"step": 4, "loss": -0.1, "grad_norm": 0.5, "learning_rate": 0.2, "kl": 0.25},
        {"step": 5, "loss": 0.4, "grad_norm": 1.5, "learning_rate": 0.1, "kl": 0.9},
        {"step": 6, "loss": 0.0, "grad_norm": 1.0, "learning_rate": 0.05, "kl": 1.3},
        {"step": 6, "train_runtime": 12.0},
    ]
    got = _history(log, UPDATES)
    assert sorted(got) == [1, 2]
    assert [got[s]["kl"] for s in (1, 2)] == [0.0, 0.25]
    assert [got[s]["learning_rate"] for s in (1, 2)] == [0.5, 0.2]
    assert [got[s]["loss"] for s in (1, 2)] == pytest.approx([0.6, 0.1])
    assert [got[s]["grad_norm"] for s in (1, 2)] == pytest.approx([3.0, 1.0])


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    from grpo_dial.backends.trl.run import trl_train

    root = tmp_path_factory.mktemp("trl_kl")
    save_tiny(root / "base")
    trl_train(root / "base", FakeTask(), dial_from_config(DIAL), CONFIG,
              {"steps": root / "steps.parquet"}, root / "ckpt")  # fmt: skip
    state = root / "ckpt" / "trl" / f"checkpoint-{CONFIG.steps * UPDATES}" / "trainer_state.json"
    entries = [e for e in json.loads(state.read_text())["log_history"] if "loss" in e]
    return pd.read_parquet(root / "steps.parquet"), {e["step"]: e for e in entries}


def test_a_run_with_kl_reports_each_batchs_first_update_kl(run):
    steps, logged = run
    assert sorted(logged) == list(range(1, CONFIG.steps * UPDATES + 1))
    kl = steps.set_index("step")["kl"]
    # batch 1, update 1: the policy is the base, so KL 0; its later updates have moved away
    assert kl[1] == pytest.approx(0.0, abs=1e-7)
    assert min(logged[2]["kl"], logged[3]["kl"]) > 1e-3
    # batch 2: TRL's entry at optimizer step 4, which differs from the batch's other updates'
    first = 1 + UPDATES
    assert kl[2] == pytest.approx(logged[first]["kl"], rel=1e-6) and kl[2] > 1e-3
    for later in (first + 1, first + 2):
        assert not math.isclose(kl[2], logged[later]["kl"], rel_tol=1e-3)
    # loss and grad_norm: the mean over the batch's updates; lr the first's
    for step in (1, 2):
        batch = [logged[g] for g in range((step - 1) * UPDATES + 1, step * UPDATES + 1)]
        assert steps.set_index("step").loc[step, "loss"] == pytest.approx(
            np.mean([e["loss"] for e in batch]), rel=1e-6)  # fmt: skip
        assert steps.set_index("step").loc[step, "lr"] == batch[0]["learning_rate"]

"""A SIGKILLed trl-backend run resumes from TRL's checkpoint; a changed setting supersedes it."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pandas as pd
import pytest
from _rl_fixtures import FakeTask, save_tiny

from grpo_dial.core.dial import dial_from_config
from grpo_dial.train.config import TrainConfig

pytest.importorskip("trl")
TESTS = Path(__file__).parents[1]
CONFIG = TrainConfig(steps=3, prompts_per_step=2, group_size=4, max_new_tokens=6, eval_every=2,
                     heldout_prompts=4, checkpoint_every=1, train_pool=8, progress=False,
                     eval_samples=0, identity_every=1)  # fmt: skip
DIAL = {"preset": "grpo", "std_ddof": 1, "eps": 1e-4}
TABLES = ("steps", "responses", "mass", "evals", "identity", "allocation")


def outputs(root: Path) -> dict:
    return {n: root / f"{n}.parquet" for n in TABLES} | {"model": root / "final"}


def train(root: Path, config: TrainConfig = CONFIG, kill_at: int | None = None) -> None:
    from grpo_dial.backends.trl.run import trl_train

    def die(step: int) -> None:
        if step == kill_at:
            os.kill(os.getpid(), signal.SIGKILL)

    trl_train(root / "base", FakeTask(), dial_from_config(DIAL), config, outputs(root),
              root / "ckpt", callback=die)  # fmt: skip


def test_a_sigkilled_run_resumes_from_its_checkpoint_and_a_changed_setting_supersedes_it(
    tmp_path, caplog
):
    save_tiny(tmp_path / "base")
    code = (
        "import sys; sys.path[:0] = [sys.argv[1], sys.argv[2]]; "
        "from pathlib import Path; from test_trl_resume import train; "
        "train(Path(sys.argv[3]), kill_at=2)"
    )
    env = dict(os.environ, OMP_NUM_THREADS="1")
    done = subprocess.run(
        [sys.executable, "-c", code, str(TESTS), str(TESTS / "backends"), str(tmp_path)], env=env,
        capture_output=True, text=True,
    )  # fmt: skip
    assert done.returncode == -signal.SIGKILL, done.stderr[-2000:]
    run_dir = tmp_path / "ckpt" / "trl"
    assert (run_dir / "checkpoint-2" / "records.json").exists()
    assert not (tmp_path / "steps.parquet").exists()

    with caplog.at_level(logging.INFO, logger="grpo_dial"):
        train(tmp_path)
    assert "resuming the TRL run from" in caplog.text and "checkpoint-2" in caplog.text
    steps = pd.read_parquet(tmp_path / "steps.parquet")
    assert list(steps["step"]) == [1, 2, 3]
    assert steps["wall_seconds"].notna().all()  # steps 1-2 from the checkpoint's records
    evals = pd.read_parquet(tmp_path / "evals.parquet")
    assert sorted(set(evals["step"])) == [0, 2, 3]  # step 0 and 2 from before the kill
    responses = pd.read_parquet(tmp_path / "responses.parquet")
    assert responses.groupby("step").size().tolist() == [8, 8, 8]
    # the identity at each step with an informative group: step 2 from the records, 3 anew
    k = responses.groupby(["step", "group"])["k"].first()
    informative = k[(k > 0) & (k < CONFIG.group_size)].index.get_level_values("step")
    identity = pd.read_parquet(tmp_path / "identity.parquet")
    assert sorted(set(identity["step"])) == sorted(set(informative)) == [2, 3]

    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="grpo_dial"):
        train(tmp_path, replace(CONFIG, lr=2e-4))
    assert "belongs to another run (train.lr: 0.0001 -> 0.0002)" in caplog.text
    aside = list((tmp_path / "ckpt").glob("trl-superseded-*"))
    assert len(aside) == 1 and (aside[0] / "checkpoint-3").is_dir()
    assert (run_dir / "checkpoint-3").is_dir()  # the new run, from step 0

"""Resume never loses a checkpoint (grpo_dial.train.resume): another run's is moved aside and
named, or stops the run with one line; more steps continue; orphaned temporary files go; old
formats get a clear message; the resume key does not depend on the device."""

from __future__ import annotations

import hashlib
import logging
import os
from dataclasses import replace

import pandas as pd
import pytest
import torch
from _rl_fixtures import FakeTask, one_thread, tiny_policy  # noqa: F401

from grpo_dial.core.dial import preset
from grpo_dial.train import checkpoint
from grpo_dial.train.config import TrainConfig
from grpo_dial.train.loop import train_run
from grpo_dial.train.resume import key_changes

CFG = TrainConfig(
    steps=4, prompts_per_step=3, group_size=4, max_new_tokens=8, train_pool=20,
    heldout_prompts=6, eval_every=2, checkpoint_every=2, identity_every=0, progress=False,
)  # fmt: skip
TABLES = ("steps", "responses", "evals")


def _run(base_dir, tmp, config=CFG, **kw):
    outputs = {name: tmp / f"{name}.parquet" for name in TABLES}
    train_run(base_dir, FakeTask(), preset("dapo"), config, outputs, tmp / "ckpt", **kw)
    return {name: pd.read_parquet(path) for name, path in outputs.items()}


def _sha(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_changed_key_moves_the_checkpoint_aside_and_names_it(base_dir, tmp_path, caplog):
    first = _run(base_dir, tmp_path)
    last = tmp_path / "ckpt" / checkpoint.FILENAME
    before = _sha(last)
    with caplog.at_level(logging.WARNING, logger="grpo_dial"):
        other = _run(base_dir, tmp_path, replace(CFG, lr=2e-4, group_size=3))
    aside = list((tmp_path / "ckpt").glob("superseded-*.pt"))
    assert len(aside) == 1 and _sha(aside[0]) == before  # kept, byte for byte
    line = next(r.getMessage() for r in caplog.records if "belongs to another run" in r.message)
    assert "train.group_size: 4 -> 3; train.lr: 0.0001 -> 0.0002" in line
    assert f"kept as {aside[0]}" in line and "\n" not in line
    assert other["steps"]["lr"].eq(2e-4).all() and len(first["steps"]) == len(other["steps"])
    assert checkpoint.load_checkpoint(aside[0])["step"] == CFG.steps


def test_strict_stops_with_one_line_and_keeps_everything(base_dir, tmp_path):
    _run(base_dir, tmp_path)
    last = tmp_path / "ckpt" / checkpoint.FILENAME
    tables = {p.name: _sha(p) for p in tmp_path.glob("*.parquet")}
    before = _sha(last)
    with pytest.raises(ValueError) as err:
        _run(base_dir, tmp_path, replace(CFG, kl_coef=0.1, resume="strict"))
    msg = str(err.value)
    assert "\n" not in msg and "belongs to another run (train.kl_coef: 0.0 -> 0.1)" in msg
    assert "--config 'train={resume: auto}'" in msg
    assert _sha(last) == before and list((tmp_path / "ckpt").iterdir()) == [last]
    assert {p.name: _sha(p) for p in tmp_path.glob("*.parquet")} == tables  # finished results


def test_more_steps_continue_from_the_checkpoint(base_dir, tmp_path, caplog):
    straight = _run(base_dir, tmp_path / "straight", replace(CFG, steps=6))
    _run(base_dir, tmp_path / "extended")
    ran = []
    with caplog.at_level(logging.INFO, logger="grpo_dial"):
        extended = _run(base_dir, tmp_path / "extended", replace(CFG, steps=6), callback=ran.append)
    assert ran == [5, 6] and "after step 4 of 6" in caplog.text
    for name in ("steps", "responses"):
        a, b = straight[name], extended[name]
        if name == "steps":
            a, b = a.drop(columns="wall_seconds"), b.drop(columns="wall_seconds")
        pd.testing.assert_frame_equal(a, b, check_exact=True)
    # fewer steps than the checkpoint holds: another run's; kept aside, never cut or overwritten
    with caplog.at_level(logging.WARNING, logger="grpo_dial"):
        short = _run(base_dir, tmp_path / "extended", replace(CFG, steps=2))
    assert "train.steps: 6 already done, 2 asked" in caplog.text and len(short["steps"]) == 2
    assert len(list((tmp_path / "extended" / "ckpt").glob("superseded-*.pt"))) == 1


def test_orphaned_temporary_files_are_removed_on_the_next_start(base_dir, tmp_path, caplog):
    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    dead = ckpt / ".last.pt.tmp-999999999"  # no such process
    live = ckpt / f".last.pt.tmp-{os.getppid()}"  # a live process may still be writing it
    dead.write_bytes(b"torn")
    live.write_bytes(b"busy")
    with caplog.at_level(logging.INFO, logger="grpo_dial"):
        _run(base_dir, tmp_path, replace(CFG, steps=1))
    assert not dead.exists() and live.exists() and f"removed {dead}" in caplog.text


def test_an_old_format_checkpoint_gets_a_clear_message(base_dir, tmp_path, caplog):
    last = tmp_path / "ckpt" / checkpoint.FILENAME
    last.parent.mkdir()
    torch.save({"format": 1, "step": 2, "key": {"base_model": [0.5]}}, last)
    with pytest.raises(ValueError, match=r"has format 1, from before device-independent") as err:
        _run(base_dir, tmp_path, replace(CFG, resume="strict"))
    assert "\n" not in str(err.value) and last.exists()
    with caplog.at_level(logging.WARNING, logger="grpo_dial"):
        _run(base_dir, tmp_path, replace(CFG, steps=1))
    assert "has format 1" in caplog.text and "kept as" in caplog.text
    (aside,) = (tmp_path / "ckpt").glob("superseded-*.pt")
    assert torch.load(aside, weights_only=True)["format"] == 1


def test_key_changes_name_every_part():
    old = {"config": {"lr": 1.0, "seed": 0}, "dial": {"eps": 1e-6}, "prompts": "a", "x": 1}
    new = {"config": {"lr": 2.0, "seed": 0, "new": 3}, "dial": {"eps": 1e-4}, "prompts": "b"}
    assert key_changes(old, new) == [
        "train.lr: 1.0 -> 2.0", "train.new: '<absent>' -> 3", "dial.eps: 1e-06 -> 0.0001",
        "the prompt pools (task, train_pool, heldout_prompts or pool_seed) changed", "x changed",
    ]  # fmt: skip
    assert key_changes(old, old) == []


# --------------------------------------------------------------------------- other hardware


def test_fingerprint_is_a_hash_of_bytes_not_a_reduction(monkeypatch):
    model, _ = tiny_policy(seed=0)
    expected = checkpoint.model_fingerprint(model)
    # another device's reduction order: every sum comes out a hair different
    real_sum = torch.Tensor.sum
    monkeypatch.setattr(torch.Tensor, "sum", lambda self, *a, **k: real_sum(self, *a, **k) + 1e-9)
    assert checkpoint.model_fingerprint(model) == expected
    monkeypatch.undo()
    same = tiny_policy(seed=0)[0]
    with torch.no_grad():  # same values in another memory layout
        w = same.lm_head.weight
        w.data = w.data.t().contiguous().t()
    assert checkpoint.model_fingerprint(same) == expected
    with torch.no_grad():
        p = next(same.parameters())
        p[(0,) * p.dim()] += 1e-4
    assert checkpoint.model_fingerprint(same) != expected
    assert checkpoint.model_fingerprint(tiny_policy(seed=1)[0]) != expected


def test_a_retry_where_sums_come_out_differently_resumes(base_dir, tmp_path, monkeypatch, caplog):
    """Another GPU type sums in another order; the run it interrupted still resumes."""
    real_sum = torch.Tensor.sum

    def other_order(self, *a, **k):  # floating sums a hair off, as another reduction order
        total = real_sum(self, *a, **k)
        return total + 1e-12 * total.abs().clamp_min(1) if total.is_floating_point() else total

    monkeypatch.setattr(torch.Tensor, "sum", other_order)

    def interrupt(step):
        if step == 2:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        _run(base_dir, tmp_path, callback=interrupt)
    monkeypatch.undo()
    ran = []
    with caplog.at_level(logging.INFO, logger="grpo_dial"):
        _run(base_dir, tmp_path, callback=ran.append)
    assert ran == [3, 4] and "after step 2 of 4" in caplog.text
    assert not list((tmp_path / "ckpt").glob("superseded-*"))


class FakeCuda:
    """torch.cuda with `n` visible devices, each with its own RNG state."""

    def __init__(self, n: int) -> None:
        self.states = {i: torch.full((8,), i, dtype=torch.uint8) for i in range(n)}

    def get_rng_state(self, index):
        return self.states[index].clone()

    def set_rng_state(self, state, index):
        self.states[index] = state.clone()  # KeyError for a device that is not visible


def _fake_cuda(monkeypatch, n):
    cuda = FakeCuda(n)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(torch.cuda, "get_rng_state", cuda.get_rng_state)
    monkeypatch.setattr(torch.cuda, "set_rng_state", cuda.set_rng_state)
    return cuda


def test_resume_with_fewer_visible_gpus(monkeypatch, tmp_path):
    import numpy as np

    rng, gen = np.random.default_rng(0), torch.Generator()
    _fake_cuda(monkeypatch, 4)
    state = checkpoint.capture_rng(rng, gen, "cuda:3")  # written on the 4th GPU of 4
    assert torch.equal(state["cuda"], torch.full((8,), 3, dtype=torch.uint8))
    checkpoint.save_checkpoint(tmp_path / "last.pt", {"rng": state, "step": 1})
    back = checkpoint.load_checkpoint(tmp_path / "last.pt")["rng"]
    one = _fake_cuda(monkeypatch, 1)  # resumed where one GPU is visible
    checkpoint.restore_rng(back, rng, gen, "cuda")
    assert torch.equal(one.states[0], torch.full((8,), 3, dtype=torch.uint8))
    checkpoint.restore_rng(back, rng, gen, "cpu")  # or on the CPU: the CUDA state is unused
    assert checkpoint.capture_rng(rng, gen, "cpu")["cuda"] is None


def _hole(path, offset_fraction: float = 0.5, size: int = 4096) -> None:
    """Zero `size` bytes in the middle of the file, keeping its size (a disk's silent damage)."""
    data = bytearray(path.read_bytes())
    at = int(len(data) * offset_fraction)
    data[at : at + size] = bytes(min(size, len(data) - at))
    path.write_bytes(bytes(data))


def test_a_checkpoint_with_a_zeroed_hole_is_refused_by_its_checksum(tmp_path):
    """Zeroed blocks inside the tensor data leave a file torch.load still reads (weights_only):
    only the content checksum tells; the intact file passes it."""
    model, _ = tiny_policy(seed=0)
    path = tmp_path / checkpoint.FILENAME
    checkpoint.save_checkpoint(path, {"step": 3, "model": model.state_dict()})
    assert checkpoint.load_checkpoint(path)["step"] == 3
    size = path.stat().st_size
    _hole(path, 0.5)
    assert path.stat().st_size == size
    torch.load(path, weights_only=True)  # still readable: the damage is silent without the sum
    with pytest.raises(checkpoint.DamagedCheckpoint, match="fails its content checksum"):
        checkpoint.load_checkpoint(path)


@pytest.mark.parametrize("damage", ["hole", "truncated"])
def test_a_damaged_last_checkpoint_is_moved_aside_and_the_run_starts_afresh(
    base_dir, tmp_path, caplog, damage
):
    """Under resume: auto (and strict alike) a holed or truncated last.pt is moved to
    damaged-<time>.pt with one warning line naming both, and the rerun finishes from step 1 to
    the uninterrupted run's tables; a second rerun finds the finished checkpoint."""
    straight = _run(base_dir, tmp_path / "straight")
    _run(base_dir, tmp_path / "run", replace(CFG, steps=2))  # checkpoint at step 2
    last = tmp_path / "run" / "ckpt" / checkpoint.FILENAME
    if damage == "hole":
        _hole(last, 0.6)
    else:
        last.write_bytes(last.read_bytes()[: last.stat().st_size // 2])
    before = _sha(last)
    ran = []
    with caplog.at_level(logging.WARNING, logger="grpo_dial"):
        again = _run(base_dir, tmp_path / "run", callback=ran.append)
    (aside,) = (tmp_path / "run" / "ckpt").glob("damaged-*.pt")
    assert _sha(aside) == before  # kept byte for byte, not deleted
    line = next(r.getMessage() for r in caplog.records if "damaged-" in r.getMessage())
    assert str(last) in line and str(aside) in line and "starting afresh" in line
    assert "\n" not in line
    assert ran == list(range(1, CFG.steps + 1))
    for name in ("steps", "responses"):
        a, b = straight[name], again[name]
        if name == "steps":
            a, b = a.drop(columns="wall_seconds"), b.drop(columns="wall_seconds")
        pd.testing.assert_frame_equal(a, b, check_exact=True)
    assert checkpoint.load_checkpoint(last)["step"] == CFG.steps

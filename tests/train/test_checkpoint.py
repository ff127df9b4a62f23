"""Checkpoints: weights_only round trip of everything a run stores, RNG restore, atomic writes."""

from __future__ import annotations

import random

import numpy as np
import pandas as pd
import pytest
import torch
from _rl_fixtures import one_thread, tiny_policy  # noqa: F401

from grpo_dial.train import checkpoint
from grpo_dial.train.config import TrainConfig


def _payload():
    model, _ = tiny_policy()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, betas=(0.9, 0.99))
    model(input_ids=torch.tensor([[1, 4, 5]])).logits.sum().backward()
    opt.step()
    random.seed(3)
    rng = np.random.default_rng(12345)
    rng.random(7)  # a state with a 128-bit integer that is not the seed's
    gen = torch.Generator().manual_seed(5)
    torch.rand(3, generator=gen)
    records = {
        "steps": [{"step": [1], "accuracy": [0.25], "kl": [float("nan")], "nonfinite": [False]}],
        "responses": [{"prompt_id": ["a", "b"], "work": [1.0, float("nan")], "k": [1, 2]}],
    }
    payload = {
        "key": {"config": TrainConfig().resume_key(), "prompts": "abc", "base_model": [0.5, -1.0]},
        "step": 4,
        "nonfinite_steps": 1,
        "records": records,
        "model": model.state_dict(),
        "optimizer": opt.state_dict(),
        "rng": checkpoint.capture_rng(rng, gen),
    }
    return payload, model, opt, rng, gen


def test_round_trip_with_weights_only(tmp_path):
    payload, model, opt, rng, gen = _payload()
    path = tmp_path / "ck" / checkpoint.FILENAME
    checkpoint.save_checkpoint(path, payload)
    loaded = torch.load(path, weights_only=True)  # the strict loader, directly
    assert loaded["format"] == checkpoint.FORMAT
    back = checkpoint.load_checkpoint(path)
    assert back["step"] == 4 and back["nonfinite_steps"] == 1
    assert back["key"] == payload["key"]  # tuples (betas) and None survive
    assert back["records"]["responses"] == [
        {"prompt_id": ["a", "b"], "work": [1.0, back["records"]["responses"][0]["work"][1]],
         "k": [1, 2]}
    ]  # fmt: skip
    assert np.isnan(back["records"]["steps"][0]["kl"][0])
    for name, tensor in model.state_dict().items():
        assert torch.equal(back["model"][name], tensor), name
    fresh_model, _ = tiny_policy()
    fresh_opt = torch.optim.AdamW(fresh_model.parameters(), lr=1e-3, betas=(0.9, 0.99))
    fresh_model.load_state_dict(back["model"])
    fresh_opt.load_state_dict(back["optimizer"])
    for a, b in zip(opt.state.values(), fresh_opt.state.values(), strict=True):
        for key in a:
            assert torch.equal(a[key], b[key])


def test_restore_rng_replays_every_stream(tmp_path):
    payload, _, _, rng, gen = _payload()
    path = tmp_path / checkpoint.FILENAME
    checkpoint.save_checkpoint(path, payload)
    expected = (random.random(), rng.random(), torch.rand(2), torch.rand(2, generator=gen))
    rng2, gen2 = np.random.default_rng(0), torch.Generator()
    random.seed(99)
    torch.manual_seed(99)
    checkpoint.restore_rng(checkpoint.load_checkpoint(path)["rng"], rng2, gen2)
    got = (random.random(), rng2.random(), torch.rand(2), torch.rand(2, generator=gen2))
    assert got[0] == expected[0] and got[1] == expected[1]
    assert torch.equal(got[2], expected[2]) and torch.equal(got[3], expected[3])


def test_failed_write_keeps_previous_checkpoint(tmp_path, monkeypatch):
    path = tmp_path / checkpoint.FILENAME
    checkpoint.save_checkpoint(path, {"step": 1})

    def torn(obj, f):
        f.write(b"partial")
        raise OSError("disk full")

    monkeypatch.setattr(checkpoint.torch, "save", torn)
    with pytest.raises(OSError, match="disk full"):
        checkpoint.save_checkpoint(path, {"step": 2})
    monkeypatch.undo()
    assert checkpoint.load_checkpoint(path)["step"] == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == [checkpoint.FILENAME]


def test_missing_and_foreign_files(tmp_path):
    assert checkpoint.load_checkpoint(tmp_path / "none.pt") is None
    bad = tmp_path / "bad.pt"
    bad.write_bytes(b"not a checkpoint")
    with pytest.raises(ValueError, match="cannot read checkpoint"):
        checkpoint.load_checkpoint(bad)
    torch.save({"step": 1}, tmp_path / "other.pt")
    with pytest.raises(ValueError, match="not a grpo-dial checkpoint"):
        checkpoint.load_checkpoint(tmp_path / "other.pt")


def test_arbitrary_objects_are_refused(tmp_path):
    # Why records are plain lists: a DataFrame would need the full unpickler.
    path = tmp_path / checkpoint.FILENAME
    checkpoint.save_checkpoint(path, {"records": pd.DataFrame({"a": [1]})})
    with pytest.raises(ValueError, match="cannot read checkpoint"):
        checkpoint.load_checkpoint(path)


def test_model_fingerprint_tells_models_apart():
    a, _ = tiny_policy(seed=0)
    b, _ = tiny_policy(seed=1)
    assert checkpoint.model_fingerprint(a) == checkpoint.model_fingerprint(tiny_policy(seed=0)[0])
    assert checkpoint.model_fingerprint(a) != checkpoint.model_fingerprint(b)

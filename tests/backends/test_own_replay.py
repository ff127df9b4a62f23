"""The runs' later states (backends/own_replay.py): a replay to step k continued equals the
uninterrupted cell step for step; the probe at k = 0 is the base probe's markers columns batch
for batch; the logit whose gradient is J moves along J; the refusals in one line."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch

from grpo_dial.analysis.aware.kernel import base_responses, mode_gradients
from grpo_dial.analysis.aware.later import check_replay
from grpo_dial.backends.own_cells import cell_config, probe_batches, train_cell
from grpo_dial.backends.own_replay import (
    mode_logits,
    probe_state,
    replay,
    replayed_steps,
    state_gradients,
)
from grpo_dial.core.dial import read_arm
from grpo_dial.data.tasks import task_from_spec
from grpo_dial.policy.masks import weight_masks

SPEC = {"name": "aware", "options": {"score_truncated": True}}
TRAIN = {"steps": 4, "prompts_per_step": 2, "group_size": 4, "lr": 5.0, "optimizer": "sgd",
         "max_new_tokens": 12, "heldout_prompts": 2}  # fmt: skip
POOL = 8


def make_base(tmp_path_factory):
    """An untrained 1-layer, 16-wide Llama on the aware task, saved: (path, task, tok, model)."""
    from grpo_dial.policy.model import (
        PolicySpec,
        build_char_tokenizer,
        build_tiny_llama,
        save_policy,
    )

    task = task_from_spec(SPEC)
    tok = build_char_tokenizer(task.alphabet)
    spec = PolicySpec(n_layers=1, hidden_size=16, n_heads=2, intermediate_size=32)
    model = build_tiny_llama(spec, tok, seed=0).eval()
    path = tmp_path_factory.mktemp("replay") / "base"
    save_policy(model, tok, path)
    return str(path), task, tok, model


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    return make_base(tmp_path_factory)


def _pools(task):
    return task.problems("train", POOL, 0), task.problems("heldout", 1, 0)


def _replay(base, steps, seed=1, weights="markers", train=TRAIN):
    path, task, _, _ = base
    problems, heldout = _pools(task)
    return replay(path, task, problems, heldout, read_arm({"preset": "grpo"}), train, seed, POOL,
                  0, steps, "cpu", weights)  # fmt: skip


@pytest.mark.parametrize("weights", ["markers", "all"])
def test_a_replay_to_k_continued_is_the_uninterrupted_cell_step_for_step(base, weights):
    """train_cell's 4 steps of seed 1 against a replay to step 2 continued by steps 3 and 4 on
    the replayed run: the step tables equal to float precision, and the stage's check passes
    the replay's first two steps and names the step where a different seed parts."""
    from grpo_dial.train import loop

    path, task, _, _ = base
    arm = read_arm({"preset": "grpo"})
    cell = train_cell(path, SPEC, arm, TRAIN, [1], POOL, 0, weights=weights).drop(columns="seed")
    assert cell["grad_norm"].gt(0).any() and len(cell) == 4
    run = _replay(base, 2, weights=weights)
    early = replayed_steps(run)
    assert list(early["step"]) == [1, 2]
    check_replay(early, cell, "(sgd, a60, grpo, seed 1)")
    config = cell_config(TRAIN, arm, POOL, 0, 1)
    for step in (3, 4):
        loop.run_step(run, task, arm.dial, config, step)
    pd.testing.assert_frame_equal(replayed_steps(run), cell, rtol=1e-12)
    other = replayed_steps(_replay(base, 2, seed=2, weights=weights))
    with pytest.raises(ValueError, match=r"^the replayed run \(x\) differs from its stored cell "
                                         r"at step 1 \("):  # fmt: skip
        check_replay(other, cell, "(x)")


def test_the_probe_at_step_0_is_the_base_probes_markers_columns(base):
    """At k = 0 the replayed run is the base with the markers' masks: probe_state on J restricted
    to the marker rows gives probe_batches' wrong_markers / correct_markers (the unrestricted
    model's gradient, J times the mask) batch for batch, and the restricted J are the full J
    times the mask."""
    path, task, tok, model = base
    r, _ = base_responses(model, tok, task, task.problems("train", 6, 0), 4, 12, 1.0,
                          torch.Generator().manual_seed(3), np.random.default_rng(3))  # fmt: skip
    e, c, _ = mode_gradients(model, tok, r)
    mask = torch.cat([m.reshape(-1) for m in weight_masks(model, tok, "markers")]).double()
    arm = read_arm({"preset": "grpo"})
    config = cell_config({**TRAIN, "grad_clip": 1e-6}, arm, POOL, 0, 1)  # a clip would bite
    problems, heldout = _pools(task)
    want = probe_batches(model, tok, task, problems, heldout, arm.dial, config, 3, e, c,
                         {"markers": (e * mask, c * mask)})  # fmt: skip
    run = _replay(base, 0)
    jw, jc = state_gradients(run, r, "markers")
    assert float(jw.abs().sum()) > 0
    rows = torch.cat([m.reshape(-1) for m in weight_masks(run.model, tok, "markers")]).bool()
    assert jw.shape == rows.shape and rows.sum() == mask.sum()  # the embedding alone trains
    assert float(jw[~rows].abs().sum()) == 0.0 == float(jc[~rows].abs().sum())
    assert torch.allclose(jw[rows], e[mask.bool()], rtol=1e-9, atol=0.0)
    assert torch.allclose(jc[rows], c[mask.bool()], rtol=1e-9, atol=0.0)
    got = probe_state(run, task, arm.dial, config, 3, jw, jc)
    assert list(got["batch"]) == [0, 1, 2] and got["wrong"].abs().gt(0).all()
    for m in ("wrong", "correct", "contrast"):
        assert got[m].to_numpy() == pytest.approx(want[f"{m}_markers"].to_numpy(), rel=1e-9)
    assert got["grad_norm"].to_numpy() != pytest.approx(want["grad_norm"].to_numpy())  # masked


def _state_at_step_two(base):
    """(task, GRPO's arm, the run replayed to step 2, a sample of its policy, its J on the
    markers' rows, the run's config): what the two probe tests below start from."""
    _, task, tok, _ = base
    arm = read_arm({"preset": "grpo"})
    run = _replay(base, 2)
    r, _ = base_responses(run.model, tok, task, task.problems("train", 6, 0), 4, 12, 1.0,
                          torch.Generator().manual_seed(3), np.random.default_rng(3))  # fmt: skip
    jw, jc = state_gradients(run, r, "markers")
    return task, arm, run, r, jw, jc, cell_config(TRAIN, arm, POOL, 0, 1)


def test_the_probe_at_a_later_state_leaves_it_and_moves_as_a_real_step(base):
    """At step 2 the probe's batch 0 against one real SGD step of the replayed run's own next
    batch (lr 1e-3, no clip): J . dw / lr per mode; the probe itself moves no weight."""
    from dataclasses import replace

    from grpo_dial.train import loop

    task, arm, run, r, jw, jc, config = _state_at_step_two(base)
    got = probe_state(run, task, arm.dial, config, 1, jw, jc, start=2)
    stepped = _replay(base, 2)
    before = torch.cat([p.detach().reshape(-1) for p in stepped.model.parameters()
                        if p.requires_grad]).double()  # fmt: skip
    for group in stepped.optimizer.param_groups:
        group["lr"] = 1e-3
    loop.run_step(stepped, task, arm.dial, replace(config, grad_clip=None), 3)
    after = torch.cat([p.detach().reshape(-1) for p in stepped.model.parameters()
                       if p.requires_grad]).double()  # fmt: skip
    delta = after - before
    assert float(delta.abs().max()) > 0
    assert got["wrong"].iloc[0] == pytest.approx(float(jw @ delta) / 1e-3, rel=1e-3, abs=1e-9)
    assert got["correct"].iloc[0] == pytest.approx(float(jc @ delta) / 1e-3, rel=1e-3, abs=1e-9)


def test_the_modes_logits_move_along_their_j(base):
    """mode_logits is the function mode_gradients differentiates: moving the trainable weights
    by eps v changes each mode's logit by eps J . v (central difference, float64 J)."""
    path, task, tok, _ = base
    run = _replay(base, 0, weights="all")
    r, _ = base_responses(run.model, tok, task, task.problems("train", 6, 0), 4, 12, 1.0,
                          torch.Generator().manual_seed(3), np.random.default_rng(3))  # fmt: skip
    jw, jc = state_gradients(run, r, "all")
    params = [p for p in run.model.parameters() if p.requires_grad]
    v = torch.randn(sum(p.numel() for p in params), generator=torch.Generator().manual_seed(0))
    eps = 1e-3

    def shifted(sign):
        with torch.no_grad():
            i = 0
            for p in params:
                p.add_(sign * eps * v[i : i + p.numel()].reshape(p.shape))
                i += p.numel()
        out = mode_logits(run.model, tok, r)
        with torch.no_grad():
            i = 0
            for p in params:
                p.sub_(sign * eps * v[i : i + p.numel()].reshape(p.shape))
                i += p.numel()
        return out

    up, down = shifted(1.0), shifted(-1.0)
    for m, j in (("wrong", jw), ("correct", jc)):
        slope = (up[m] - down[m]) / (2 * eps)
        assert slope == pytest.approx(float(j @ v.double()), rel=2e-2)
    assert up["wrong"] != pytest.approx(up["correct"])


def test_the_replay_refuses_a_step_past_the_run_and_decay_on_the_markers(base):
    with pytest.raises(ValueError, match=r"^a later state's step must be in 0\.\.train\.steps "
                                         r"\(4\), got 5$"):  # fmt: skip
        _replay(base, 5)
    with pytest.raises(ValueError, match=r"^sweep weights 'markers' with weight_decay 0\.1: "):
        _replay(base, 1, train={**TRAIN, "weight_decay": 0.1})
    run = _replay(base, 0)
    with pytest.raises(ValueError, match=r"^batches must be >= 1, got 0$"):
        probe_state(run, base[1], read_arm({"preset": "grpo"}).dial,
                    cell_config(TRAIN, read_arm({"preset": "grpo"}), POOL, 0, 1), 0, None, None)


def test_the_whole_step_is_a_real_sgd_steps_logit_move_and_tends_to_the_first_order(base):
    """probe_state's wrong_step / correct_step at lr 2: the logits a real SGD step of the
    replayed run (lr 2, no clip, its own next batch) moves, per unit lr; the whole step less the
    first order is the curvature, (lr / 2) g' H g per unit lr: twice at lr 2 what it is at lr 1,
    and at lr 0.01 within 2 % of the first order (float32 logits)."""
    from dataclasses import replace

    from grpo_dial.train import loop

    task, arm, run, r, jw, jc, config = _state_at_step_two(base)
    got = probe_state(run, task, arm.dial, config, 2, jw, jc, 2, (2.0, r, 512))
    half = probe_state(_replay(base, 2), task, arm.dial, config, 2, jw, jc, 2, (1.0, r, 512))
    small = probe_state(_replay(base, 2), task, arm.dial, config, 2, jw, jc, 2, (1e-2, r, 512))
    for m in ("wrong", "correct"):
        assert small[f"{m}_step"].to_numpy() == pytest.approx(small[m].to_numpy(), rel=2e-2)
        assert (got[f"{m}_step"] - got[m]).to_numpy() == pytest.approx(
            2 * (half[f"{m}_step"] - half[m]).to_numpy(), rel=0.2)  # fmt: skip
    stepped = _replay(base, 2)
    at = mode_logits(stepped.model, stepped.tokenizer, r)
    for group in stepped.optimizer.param_groups:
        group["lr"] = 2.0
    loop.run_step(stepped, task, arm.dial, replace(config, grad_clip=None), 3)
    moved = mode_logits(stepped.model, stepped.tokenizer, r)
    for m in ("wrong", "correct"):
        assert got[f"{m}_step"].iloc[0] == pytest.approx((moved[m] - at[m]) / 2.0, rel=1e-6)
    curvature = (got["wrong_step"] - got["wrong"]).abs()
    assert float(curvature.max()) > 1e-3 * float(got["wrong"].abs().max())  # lr 2 is not linear

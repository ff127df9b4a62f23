"""The identity probe on a tiny real Llama, against scores and closed forms computed another way."""

from __future__ import annotations

import math

import pytest
import torch
from _rl_fixtures import informative_batch, one_thread, tiny_policy  # noqa: F401

from grpo_dial.core.advantage import group_stats, silent_groups
from grpo_dial.core.dial import Dial, preset
from grpo_dial.train.probe import (
    IDENTITY_COLUMNS,
    identity_probe,
    probe_group,
    response_scores,
)


@pytest.fixture(scope="module")
def setup():
    torch.manual_seed(0)
    model, tokenizer = tiny_policy(seed=1)
    ro, rewards = informative_batch(model, tokenizer, n_problems=8, group_size=4, seed=3)
    stats = group_stats(rewards, ro.group_ids)
    live = stats.ids[~silent_groups(stats)].tolist()
    assert len(live) >= 2 and len(live) < 8, "fixture needs informative and silent groups"
    return model, ro, rewards, live


def _group(ro, rewards, g):
    rows = (ro.group_ids == g).nonzero().squeeze(1)
    return ro.select(rows), rewards[rows]


def _solo_scores(model, group) -> torch.Tensor:
    """s_i from a forward over the unpadded prompt + response alone, log-softmax by hand."""
    params = [p for p in model.parameters() if p.requires_grad]
    out = []
    for i in range(len(group)):
        prompt = group.prompt_ids[i][group.prompt_mask[i].bool()]
        resp = group.response_ids[i][group.response_mask[i].bool()]
        ids = torch.cat([prompt, resp])[None]
        logits = model(input_ids=ids).logits[0, len(prompt) - 1 : -1]  # (|o|, V)
        logp = torch.log_softmax(logits.double(), -1).gather(-1, resp[:, None]).sum()
        grads = torch.autograd.grad(logp, params, allow_unused=True)
        flat = [torch.zeros_like(p) if g is None else g for g, p in zip(grads, params, strict=True)]
        out.append(torch.cat([g.reshape(-1) for g in flat]).double())
    return torch.stack(out)  # (G, D)


def test_scores_match_unpadded_single_forwards(setup):
    model, ro, rewards, live = setup
    group, _ = _group(ro, rewards, live[0])
    scores, _ = response_scores(model, group)
    torch.testing.assert_close(scores, _solo_scores(model, group), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize(
    "dial",
    [
        preset("grpo"),
        preset("dr_grpo"),
        preset("grpo").replace(eps=0.0),
        preset("dr_grpo").replace(std_ddof=1, eps=0.0),
        preset("grpo").replace(std_ddof=1, eps=1e-4),  # TRL's
        preset("dapo").replace(std_power=0.5),
    ],
)
def test_sequence_identity_and_factor(setup, dial: Dial):
    model, ro, rewards, live = setup
    group, r = _group(ro, rewards, live[0])
    row = probe_group(model, group, r, dial)
    g, k = len(r), int(r.sum())
    sigma = math.sqrt(k * (g - k)) / g
    sigma_d = sigma * math.sqrt(g / (g - 1)) if dial.std_ddof else sigma
    factor = sigma**2 / (sigma_d + dial.eps) ** dial.std_power
    assert row["sigma"] == pytest.approx(sigma, rel=1e-12)
    assert row["factor"] == pytest.approx(factor, rel=1e-12)
    if dial.eps == 0 and dial.std_ddof == 0:
        assert row["factor"] == pytest.approx(sigma ** (2 - dial.std_power), rel=1e-12)
    assert 0 <= row["seq_relative_residual"] < 1e-4
    # The same relation on independently computed scores and hand-computed advantages.
    s = _solo_scores(model, group)
    adv = (r.double() - k / g) / (sigma_d + dial.eps) ** dial.std_power
    lhs = (adv[:, None] * s).mean(0)
    rhs = factor * (s[r == 1].mean(0) - s[r == 0].mean(0))
    assert float((lhs - rhs).norm() / rhs.norm()) < 1e-4
    assert 0 < row["token_cosine"] <= 1 + 1e-9


def test_token_level_aggregation(setup):
    model, ro, rewards, live = setup
    # A group with unequal response lengths, where the 1/|o_i| weighting bends the direction.
    for g in live:
        group, r = _group(ro, rewards, g)
        if group.response_lengths.unique().numel() > 1:
            break
    else:
        pytest.fail("fixture has no informative group with unequal lengths")
    lengths = group.response_lengths.double()
    seq = probe_group(model, group, r, preset("grpo"))
    tok = probe_group(model, group, r, preset("dapo"))
    const = probe_group(model, group, r, preset("dr_grpo").replace(max_length=10))
    assert 0 < seq["token_cosine"] < 1 - 1e-6
    # Token mean and constant normalizer are lhs times a scalar: cosine 1, ratio = the scalar.
    assert tok["token_cosine"] == pytest.approx(1.0, abs=1e-6)
    assert tok["token_norm_ratio"] == pytest.approx(len(r) / float(lengths.sum()), rel=1e-5)
    assert const["token_cosine"] == pytest.approx(1.0, abs=1e-6)
    assert const["token_norm_ratio"] == pytest.approx(1 / 10, rel=1e-5)
    assert seq["mean_len_correct"] == pytest.approx(float(lengths[r == 1].mean()))
    assert seq["mean_len_incorrect"] == pytest.approx(float(lengths[r == 0].mean()))


def test_probe_table_uses_only_informative_groups(setup):
    model, ro, rewards, live = setup
    table = identity_probe(model, ro, rewards, preset("grpo"), n_groups=3, step=7)
    assert list(table.columns) == IDENTITY_COLUMNS
    assert table["group"].tolist() == live[:3]
    assert (table["step"] == 7).all()
    assert ((table["k"] > 0) & (table["k"] < table["G"])).all()
    assert (table["seq_relative_residual"] < 1e-4).all()
    empty = identity_probe(model, ro, torch.zeros_like(rewards), preset("grpo"), 3, step=1)
    assert list(empty.columns) == IDENTITY_COLUMNS and len(empty) == 0


def test_probe_rejects_silent_and_non_binary(setup):
    model, ro, rewards, live = setup
    group, r = _group(ro, rewards, live[0])
    with pytest.raises(ValueError, match="informative group"):
        probe_group(model, group, torch.ones_like(r), preset("grpo"))
    with pytest.raises(ValueError, match="binary rewards"):
        probe_group(model, group, r * 0.5, preset("grpo"))
    with pytest.raises(ValueError, match="rewards for"):
        identity_probe(model, ro, rewards[:-1], preset("grpo"), 1, step=0)


def test_probe_peak_is_two_sums_not_one_gradient_per_response():
    """On a SmolLM2-shaped model (2 layers, 4096 tokens): the probe's measured peak is the
    group's graph plus ~20 B per parameter (two float64 sums, one float32 gradient), far below
    stacking G = 8 float64 gradients (response_scores, the former way)."""
    from dataclasses import replace as dc_replace

    from grpo_dial.data.tasks.base import Problem
    from grpo_dial.policy import memory
    from grpo_dial.tools.bench import update_memory as um
    from grpo_dial.tools.bench.memory import PeakMemory

    config = um.smollm2_shaped(layers=2, vocab=4096, hidden=192)
    model = um.random_model(config)
    group = um.random_rollouts(8, 16, 24, config.vocab_size, group_size=8)
    group = dc_replace(group, problems=[Problem("p0", "x", "y", "easy")] * 8)
    rewards = torch.tensor([1.0, 0, 1, 0, 0, 1, 0, 0])
    n = memory.Shape.of(config).params
    peaks = []
    for probe in (lambda: probe_group(model, group, rewards, preset("grpo")),
                  lambda: response_scores(model, group)):  # fmt: skip
        peak = PeakMemory("cpu")
        peak.start()
        out = probe()
        peaks.append(peak.stop())
        del out
    graph = memory.bucket_bytes(memory.Shape.of(config), 8, 16, 24, "fp32", unique_prompts=1)
    assert peaks[0] < 1.3 * graph + 24 * n, (peaks, graph, n)  # two float64 sums + a gradient
    assert peaks[1] > 8 * 8 * n  # G float64 gradients
    assert peaks[0] < 0.5 * peaks[1]

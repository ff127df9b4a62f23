"""Tests for forced response prefixes (policy/rollout/forced.py and generate_groups(prefixes)):
the sampler writes the task's text, counts it, keeps it through select / concat, and the update's
token weights drop exactly those positions while |o| still counts them."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from grpo_dial.core import advantage
from grpo_dial.core.dial import Dial
from grpo_dial.data.tasks import AwareTask, get_task
from grpo_dial.policy.model import PolicySpec, build_char_tokenizer, build_tiny_llama
from grpo_dial.policy.rollout import concat, forced, generate_groups

TASK = AwareTask()
SPEC = PolicySpec(n_layers=1, hidden_size=32, n_heads=2, intermediate_size=64)


@pytest.fixture(scope="module")
def policy():
    tok = build_char_tokenizer(TASK.alphabet)
    return build_tiny_llama(SPEC, tok, 0), tok


def test_no_prefix_for_other_tasks():
    arith = get_task("arithmetic")
    assert forced.draw_prefixes(arith, arith.problems("train", 2, 0), 4, None) is None


@pytest.mark.parametrize("generation_batch", [None, 5])
def test_prefixes_written_and_counted(policy, generation_batch):
    model, tok = policy
    problems = TASK.problems("train", 3, 0)
    pre = forced.draw_prefixes(TASK, problems, 4, np.random.default_rng(0))
    assert len(pre) == 12
    g = torch.Generator().manual_seed(0)
    ro = generate_groups(
        model, tok, problems, 4, 10, 1.0, g, prefixes=pre, generation_batch=generation_batch
    )
    assert all(t.startswith(p) for t, p in zip(ro.texts, pre, strict=True))
    assert ro.forced.tolist() == [len(p) for p in pre]  # one token per character
    assert ro.prefixes == pre
    both = concat([ro, ro.select(torch.tensor([1, 7]))])
    assert both.forced.tolist()[-2:] == [len(pre[1]), len(pre[7])]
    assert both.prefixes[-2:] == [pre[1], pre[7]]


def test_greedy_after_prefix_is_the_policy_continuation(policy):
    """Forcing = conditioning: the greedy continuation after a forced prefix equals the greedy
    response to the prompt with the prefix appended (computed a second way)."""
    model, tok = policy
    p = TASK.problems("train", 1, 0)[0]
    ro = generate_groups(model, tok, [p], 1, 9, 0.0, prefixes=["~" + p.reference])
    from dataclasses import replace

    ref = generate_groups(model, tok, [replace(p, prompt=p.prompt + "~" + p.reference)], 1,
                          9 - 1 - len(p.reference), 0.0)  # fmt: skip
    assert ro.texts[0] == "~" + p.reference + ref.texts[0]


def test_free_weights_zero_forced_positions_keep_lengths():
    mask = torch.tensor([[1, 1, 1, 1, 0], [1, 1, 1, 1, 1]])
    w = advantage.make_token_weights(Dial())(mask, torch.tensor([0, 0]), None)  # sequence
    out = forced.free_weights(w, torch.tensor([2, 3]))
    assert out[0].tolist() == pytest.approx([0, 0, 1 / 8, 1 / 8, 0])  # 1/(B |o|), |o| = 4
    assert out[1].tolist() == pytest.approx([0, 0, 0, 1 / 10, 1 / 10])
    assert forced.free_weights(w, None) is w

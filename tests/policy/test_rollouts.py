"""The Rollouts batch: row selection and concatenation keep rows, groups and log-probs."""

from __future__ import annotations

import pytest
import torch
from _rollout_fixtures import make_problems, sample_groups, tiny_model, tiny_tokenizer

from grpo_dial.policy.rollout import Rollouts, concat, response_logprobs


@pytest.fixture(scope="module")
def tok():
    return tiny_tokenizer()


@pytest.fixture(scope="module")
def model(tok):
    return tiny_model(tok)


def test_concat_renumbers_groups_and_keeps_logprobs(model, tok):
    a = sample_groups(model, tok, problems=make_problems(["7="]), g=2, max_new=6, seed=1)
    b = sample_groups(model, tok, g=3, max_new=9, seed=2)
    c = concat([a, b])
    assert torch.equal(c.group_ids, torch.tensor([0, 0, 1, 1, 1, 2, 2, 2, 3, 3, 3]))
    assert c.texts == a.texts + b.texts and len(c.problems) == 11
    assert torch.equal(c.finished, torch.cat([a.finished, b.finished]))
    with torch.no_grad():
        lc = response_logprobs(model, c)
        la, lb = response_logprobs(model, a), response_logprobs(model, b)
    assert torch.allclose(lc[:2, : la.shape[1]], la, atol=1e-5)
    assert torch.allclose(lc[2:, : lb.shape[1]], lb, atol=1e-5)
    assert torch.all(lc[:2, la.shape[1] :] == 0)
    assert torch.equal(c.response_lengths, torch.cat([a.response_lengths, b.response_lengths]))
    with pytest.raises(ValueError, match="at least one"):
        concat([])


def test_select_keeps_rows_and_renumbers(model, tok):
    r = sample_groups(model, tok, g=2, max_new=4)
    s = r.select(r.group_ids != 1)
    assert isinstance(s, Rollouts) and len(s) == 4
    assert torch.equal(s.group_ids, torch.tensor([0, 0, 1, 1]))
    assert [p.prompt for p in s.problems] == ["7=", "7=", "99*9-14=", "99*9-14="]
    assert torch.equal(s.response_ids, r.response_ids[[0, 1, 4, 5]])

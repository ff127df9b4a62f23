"""core.advantage: integer rewards, an unknown context key, and the weighted loss of a split
batch."""

import pytest
import torch

from grpo_dial.core.advantage import advantages as advantages_of
from grpo_dial.core.advantage import (
    group_stats,
    make_token_weights,
    policy_loss,
    weighted_policy_loss,
)
from grpo_dial.core.dial import Dial


def test_integer_rewards_are_read_as_floats():
    stats = group_stats(torch.tensor([1, 0, 1, 1]), torch.tensor([0, 0, 1, 1]))
    assert stats.rewards.dtype == torch.get_default_dtype() == stats.k.dtype
    assert stats.k.tolist() == [1.0, 2.0]


def test_an_unknown_context_key_is_refused():
    with pytest.raises(ValueError, match="^unknown advantage context 'bogus'; valid: "):
        advantages_of(torch.tensor([1.0, 0.0]), torch.tensor([0, 0]), Dial(), bogus=1.0)


def test_weighted_losses_of_a_split_sum_to_the_policy_loss():
    dial = Dial().replace(length_norm="token")
    g = torch.Generator().manual_seed(3)
    logp, old = -torch.rand(4, 3, generator=g), -torch.rand(4, 3, generator=g)
    mask = torch.tensor([[1, 1, 0], [1, 1, 1], [1, 0, 0], [1, 1, 0]], dtype=torch.float64)
    adv = torch.tensor([1.0, -0.5, 0.25, -1.0])
    w = make_token_weights(dial)(mask)
    parts = weighted_policy_loss(logp[:2], old[:2], adv[:2], w[:2], dial) + weighted_policy_loss(
        logp[2:], old[2:], adv[2:], w[2:], dial
    )
    assert parts.item() == pytest.approx(policy_loss(logp, old, adv, mask, dial).item())

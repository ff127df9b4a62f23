"""core.advantage: keep_mask is a bool mask under either silent policy."""

import torch

from grpo_dial.core.advantage import keep_mask
from grpo_dial.core.dial import Dial


def test_keep_mask_is_bool():
    rewards, ids = torch.tensor([1.0, 1.0, 0.0, 1.0]), torch.tensor([0, 0, 1, 1])
    kept = keep_mask(rewards, ids, Dial())
    assert kept.dtype == torch.bool and kept.tolist() == [True] * 4
    dropped = keep_mask(rewards, ids, Dial().replace(silent="drop"))
    assert dropped.dtype == torch.bool and dropped.tolist() == [False, False, True, True]

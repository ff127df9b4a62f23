"""core.token_weights: bnpo with one row per micro-batch, and its refusal without rows."""

import pytest
import torch

from grpo_dial.core.token_weights import aggregation_weights, bnpo_weights


def test_bnpo_with_one_row_per_micro_batch():
    # rows of 2 and 1 tokens, each its own micro-batch (C = 2): 1/(2 x 2) and 1/(2 x 1)
    mask = torch.tensor([[1.0, 1.0, 0.0], [1.0, 0.0, 0.0]])
    w = bnpo_weights(mask, 1)
    assert w[:, 0].tolist() == [0.25, 0.5] and w[0, 1] == 0.25 and w[0, 2] == 0.0
    with pytest.raises(ValueError) as err:
        aggregation_weights(mask, "bnpo")
    assert str(err.value) == "the 'bnpo' aggregation needs its micro-batch rows"

"""core.token_weights: refusals and the dtype of a weighted sum."""

import re

import pytest
import torch

from grpo_dial.core.token_weights import (
    aggregation_weights,
    bnpo_weights,
    lambda_weights,
    weighted_sum,
)


def test_lambda_weights_refuses_group_ids_of_the_wrong_shape():
    mask = torch.ones(3, 2)
    with pytest.raises(ValueError, match=re.escape("group_ids must be (B,) = (3,)")):
        lambda_weights(mask, torch.tensor([0, 1]), 0.5)


def test_an_unknown_aggregation_lists_the_valid_ones():
    want = "unknown aggregation 'x'; valid: sequence, token, constant, sequence_sum, sum, bnpo"
    with pytest.raises(ValueError, match=f"^{re.escape(want)}$"):
        aggregation_weights(torch.ones(2, 2), "x")


@pytest.mark.parametrize("rows", [True, 2.0, 0])
def test_bnpo_rows_must_be_an_integer(rows):
    with pytest.raises(ValueError, match="^rows must be an integer >= 1"):
        bnpo_weights(torch.ones(2, 2), rows)


def test_weighted_sum_keeps_the_losses_dtype():
    loss = torch.tensor([[1.0, 2.0], [3.0, float("nan")]], dtype=torch.float32)
    w = torch.tensor([[0.5, 0.25], [1.0, 0.0]], dtype=torch.float64)
    got = weighted_sum(loss, w)
    assert got.dtype == torch.float32 and got.item() == 0.5 + 0.5 + 3.0


def test_a_batch_of_one_token_weighs_it_one():
    # lambda = 0 is the token mean: 1 / (tokens of the batch) on each token
    got = lambda_weights(torch.tensor([[1.0, 0.0], [0.0, 0.0]]), None, 0.0)
    assert got.tolist() == [[1.0, 0.0], [0.0, 0.0]]

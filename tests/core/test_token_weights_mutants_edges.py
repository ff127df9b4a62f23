"""core.token_weights at its edges: one token, one row, a width of one, the defaults, and the
device every intermediate lives on (the meta device stands in for a GPU: a CPU tensor mixed into
a meta computation is refused)."""

import math

import pytest
import torch

from grpo_dial.core.token_weights import (
    _one_group,
    bnpo_weights,
    constant_weights,
    lambda_objective,
    lambda_weights,
    sequence_sum_weights,
    sequence_weights,
)


def test_group_ids_follow_the_masks_device():
    mask = torch.ones(3, 2, device="meta")
    assert _one_group(mask, None).device.type == "meta"
    assert _one_group(mask, None).dtype == torch.long
    assert _one_group(mask, torch.tensor([0, 0, 1])).device.type == "meta"


def test_bnpo_micro_batches_follow_the_masks_device():
    w = bnpo_weights(torch.ones(4, 3, device="meta"), 2)
    assert w.device.type == "meta" and w.shape == (4, 3)


def test_one_nonempty_row_is_the_whole_batch_without_empty_rows():
    # count_empty False: B = 1 (the empty row is left out), so row 0 weighs 1 / (1 x 2)
    mask = torch.tensor([[1.0, 1.0, 0.0], [0.0, 0.0, 0.0]])
    assert sequence_weights(mask, count_empty=False)[0].tolist() == [0.5, 0.5, 0.0]
    assert sequence_weights(mask)[0].tolist() == [0.25, 0.25, 0.0]


def test_sequence_sum_counts_an_empty_row_by_default():
    mask = torch.tensor([[1.0, 1.0], [0.0, 0.0]])
    assert sequence_sum_weights(mask)[0].tolist() == [0.5, 0.5]
    assert sequence_sum_weights(mask, count_empty=False)[0].tolist() == [1.0, 1.0]


def test_constant_weights_at_a_width_of_one():
    # B = 2, L_max = T = 1: 1 / 2; a max_length of 1 on a wider mask is the same
    assert constant_weights(torch.ones(2, 1)).tolist() == [[0.5], [0.5]]
    assert constant_weights(torch.tensor([[1.0, 0.0]]), max_length=1).tolist() == [[1.0, 0.0]]


def test_bnpo_a_micro_batch_of_one_token():
    # rows 2: micro-batches {0, 1} with 1 + 0 tokens and {2} with 2; C = 2
    mask = torch.tensor([[1.0, 0.0], [0.0, 0.0], [1.0, 1.0]])
    assert bnpo_weights(mask, 2).tolist() == [[0.5, 0.0], [0.0, 0.0], [0.25, 0.25]]


def test_lambda_weights_default_lambda_is_the_token_mean():
    mask = torch.tensor([[1.0, 0.0, 0.0], [1.0, 1.0, 1.0]])
    assert lambda_weights(mask, torch.tensor([0, 0])).tolist() == [
        [0.25, 0.0, 0.0],
        [0.25, 0.25, 0.25],
    ]


def test_lambda_weights_one_group_on_a_wide_mask():
    # B 2, T 3, lengths 1 and 3: z = -1, +1, h = 1 -+ r, lambda 1: f_i = 2 e^h_i / sum e^h
    r = 0.25
    mask = torch.tensor([[1.0, 0.0, 0.0], [1.0, 1.0, 1.0]])
    e1, e2 = math.exp(1 - r), math.exp(1 + r)
    f1, f2 = 2 * e1 / (e1 + e2), 2 * e2 / (e1 + e2)
    got = lambda_weights(mask, None, 1.0, r)
    assert got[0].tolist() == pytest.approx([f1 / 4, 0.0, 0.0], rel=1e-12)
    assert got[1].tolist() == pytest.approx([f2 / 4] * 3, rel=1e-12)


def test_lambda_objective_of_one_token():
    # one response of one token (and an empty one): f = 1 at lambda 0, J = 3 / 1
    mask = torch.tensor([[1.0, 0.0], [0.0, 0.0]])
    got = lambda_objective(torch.tensor([3.0, 0.0]), mask, None, torch.tensor(0.0), 0.25)
    assert got.item() == 3.0

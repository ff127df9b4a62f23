"""Tests from `make mutate`'s full runs of core/engine_estimators.py and core/engine_losses.py:
verl's lone response under every slot owner, the length check's three conditions and its line,
the clash refusals word for word, and empty responses counted by the engines' aggregations."""

from __future__ import annotations

import pytest
import torch

from grpo_dial.core.advantage import advantages, make_token_weights
from grpo_dial.core.dial import Dial, dial_from_config
from grpo_dial.core.engine_estimators import _lengths

F64 = torch.float64
# group 0: 1, 0, 0.5 (mean 0.5, population std sqrt(1/6) = 0.408248, sample std 0.5); group 1:
# a lone response of reward 0.6
REWARDS = torch.tensor([1.0, 0.0, 0.5, 0.6], dtype=F64)
IDS = torch.tensor([0, 0, 0, 1])


def _adv(spec, **context):
    return advantages(REWARDS, IDS, dial_from_config(spec), **context).tolist()


@pytest.mark.parametrize(
    ("spec", "want"),
    [
        # GRPO: 0.5 / (0.408248 + 0.1) = 0.983771; the lone one r / (1 + eps) = 0.6 / 1.1
        ({"eps": 0.1}, [0.983771, -0.983771, 0.0, 0.545455]),
        # std_power 1/2: 0.5 / sqrt(0.5 + 0.1) (sample std) and 0.6 / sqrt(1.1) = 0.572078
        ({"eps": 0.1, "std_ddof": 1, "std_power": 0.5}, [0.645497, -0.645497, 0.0, 0.572078]),
        # pass@k: the best moves by 1 - 0.5 = 0.5, over the sample std 0.5 + 0.1
        ({"preset": "grpo_passk", "eps": 0.1}, [0.833333, 0.0, 0.0, 0.545455]),
        # batch std: the sample std of all four rewards is sqrt(0.5075 / 3) = 0.411299, and
        # it divides the lone response too: 0.6 / 0.411299 = 1.458794 (not 0.6 / (1 + eps))
        ({"preset": "batch_std", "eps": 0.0}, [1.215661, -1.215661, 0.0, 1.458794]),
        # RLOO: 3/2 x (r - mean) in the group; the lone response keeps r (no std)
        ({"preset": "rloo"}, [0.75, -0.75, 0.0, 0.6]),
    ],
)
def test_a_lone_response_keeps_its_reward_over_one_plus_eps(spec, want):
    assert _adv({**spec, "singleton": "reward"}) == pytest.approx(want, abs=1e-6)
    zero = _adv(spec)  # the project's rule: a group of one has advantage 0
    assert zero[:3] == pytest.approx(want[:3], abs=1e-6) and zero[3] == 0.0


def test_a_lone_response_under_opo_and_a_group_of_two_keeps_its_std():
    lengths = torch.tensor([3, 1, 2, 5])
    # OPO: b = (3 x 1 + 1 x 0 + 2 x 0.5) / 6 = 2/3 in group 0; the lone one keeps 0.6
    got = _adv({"preset": "opo", "singleton": "reward"}, lengths=lengths)
    assert got == pytest.approx([1 / 3, -2 / 3, -1 / 6, 0.6])
    # a group of two is not lone: its std 0.5 divides (r - mean) = +-0.5
    two = advantages(
        torch.tensor([1.0, 0.0], dtype=F64), torch.tensor([0, 0]),
        dial_from_config({"singleton": "reward", "eps": 0.0}),
    )  # fmt: skip
    assert two.tolist() == [1.0, -1.0]


def test_the_length_check_refuses_each_bad_length_alone():
    adv = torch.zeros(3, dtype=F64)
    line = "whiten='token' needs a length >= 0 per response (N,) = (3,), got shape "
    for bad, shape in [([1, 2], "(2,)"), ([1, -1, 2], "(3,)"), ([1, float("nan"), 2], "(3,)")]:
        with pytest.raises(ValueError) as err:
            _lengths(bad, adv, Dial(), "whiten='token'")
        assert str(err.value) == line + shape
    n = _lengths([1, 0, 2], adv, Dial(), "whiten='token'")
    assert n.dtype == F64 and n.tolist() == [1.0, 0.0, 2.0]


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_the_lengths_move_to_the_advantages_device():
    adv = torch.zeros(3, dtype=F64, device="cuda")
    assert _lengths([1, 0, 2], adv, Dial(), "x").device == adv.device


def test_the_clash_refusals_word_for_word():
    with pytest.raises(ValueError) as err:
        Dial(baseline="none")
    assert str(err.value).endswith(
        "baseline='none' needs std_power 0 (a silent group's reward would be divided by eps)"
    )
    with pytest.raises(ValueError) as err:
        Dial(ratio_level="sequence", length_norm="lambda", lambda_learnable=True)
    assert str(err.value).endswith(
        "ratio_level='sequence' takes no learnable lambda (its loss sums use token ratios)"
    )


@pytest.mark.parametrize(("norm", "count", "skip"), [("sequence_sum", 1 / 3, 1 / 2)])
def test_empty_responses_count_in_b_unless_skipped(norm, count, skip):
    """LUSPO's sequence sum over rows of 2, 0 and 3 tokens: a token of row 0 weighs 1 / B, B = 3
    responses ('count', TRL) or 2 with a token ('skip', verl)."""
    mask = torch.tensor([[1, 1, 0], [0, 0, 0], [1, 1, 1]], dtype=F64)
    counted = make_token_weights(Dial(length_norm=norm))(mask)
    skipped = make_token_weights(Dial(length_norm=norm, empty_rows="skip"))(mask)
    assert float(counted[0, 0]) == pytest.approx(count)
    assert float(skipped[0, 0]) == pytest.approx(skip)

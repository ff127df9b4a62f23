"""verl's own estimators and loss aggregation (verl.trainer.ppo.core_algos, verl 0.9.1) against
the dial's, on random batches (engine_batches: groups of 1-16, ties, unanimous groups,
continuous rewards, empty and unequal responses): every advantage token and every loss to
1e-6. Each dial is the setting docs/estimators.md names for that verl option.

verl's package __init__ loads its Ray data protocol; core_algos itself is torch. So the module
is imported without verl/__init__.py, with `ray` stubbed when it is not installed (the
functions tested never call it). Without verl the module skips in one line."""

from __future__ import annotations

import importlib.util
import sys
import types
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from engine_batches import random_batch, token_losses

from grpo_dial.core.advantage import advantages, make_token_weights, policy_loss
from grpo_dial.core.dial import dial_from_config
from grpo_dial.core.token_weights import weighted_sum

TOL = 1e-6
SEEDS = range(60)


class _Stub(types.ModuleType):
    """A module whose every attribute is another stub, callable as an identity decorator."""

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        sub = _Stub(f"{self.__name__}.{name}")
        sys.modules[sub.__name__] = sub
        setattr(self, name, sub)
        return sub

    def __call__(self, *args, **kwargs):
        if len(args) == 1 and callable(args[0]) and not kwargs:
            return args[0]
        return lambda f: f

    def __getitem__(self, key):
        return self

    def __mro_entries__(self, bases):
        return (object,)


def _core_algos():
    """verl.trainer.ppo.core_algos, or skip saying verl is missing."""
    spec = importlib.util.find_spec("verl")
    if spec is None:
        pytest.skip(
            "verl is not installed (pip install --no-deps verl==0.9.1 and the 'engines' extra)",
            allow_module_level=True,
        )
    if "verl" not in sys.modules:
        if importlib.util.find_spec("ray") is None:
            sys.modules["ray"] = _Stub("ray")
        package = types.ModuleType("verl")
        package.__path__ = list(spec.submodule_search_locations)
        package.__spec__ = spec
        sys.modules["verl"] = package
    from verl.trainer.ppo import core_algos

    return core_algos


CA = _core_algos()
SINGLE = {"singleton": "reward"}  # verl: a group of one has mean 0 and std 1

# verl estimator -> (its keyword arguments, the dial that reproduces it, smallest group)
ESTIMATORS = {
    "grpo": ({"norm_adv_by_std_in_grpo": True}, {"std_ddof": 1, **SINGLE}, 1),
    "grpo (norm_adv_by_std_in_grpo False)": (
        {"norm_adv_by_std_in_grpo": False}, {"preset": "dr_grpo", **SINGLE}, 1),
    "grpo_vectorized": ({"norm_adv_by_std_in_grpo": True}, {"std_ddof": 1, **SINGLE}, 1),
    "rloo": ({}, {"preset": "rloo", **SINGLE}, 1),
    "rloo_vectorized": ({}, {"preset": "rloo"}, 1),  # its lone response gets 0, not r
    "opo": ({}, {"preset": "opo", **SINGLE}, 1),
    "gpg": ({}, {"preset": "gpg", **SINGLE}, 1),
    "grpo_passk": ({"config": {"norm_adv_by_std_in_grpo": True}}, {"preset": "grpo_passk"}, 2),
    "grpo_passk (norm False)": (
        {"config": {"norm_adv_by_std_in_grpo": False}},
        {"preset": "grpo_passk", "std_power": 0.0}, 2),
    "reinforce_plus_plus_baseline": ({}, {"preset": "reinforce_pp_baseline", **SINGLE}, 1),
    "reinforce_plus_plus": ({"config": SimpleNamespace(gamma=1.0)}, {"preset": "reinforce_pp"}, 1),
    "gdpo": ({"norm_adv_by_std_in_grpo": True}, {"preset": "gdpo"}, 1),  # one reward component
}  # fmt: skip


def _verl_advantages(name: str, kwargs: dict, batch) -> torch.Tensor:
    """(N, T) verl's advantages: the reward on each response's last token (column 0 when it
    is empty; outcome estimators read the row sum)."""
    scores = torch.zeros_like(batch.mask)
    scores[torch.arange(len(batch.rewards)), (batch.lengths - 1).clamp(min=0)] = batch.rewards
    index = batch.group_ids.numpy()
    fn = CA.get_adv_estimator_fn(name.split(" ")[0])
    call = {"token_level_rewards": scores, "response_mask": batch.mask.clone(), **kwargs}
    if name.split(" ")[0] != "reinforce_plus_plus":
        call["index"] = index
    if name.startswith("grpo") and "config" not in kwargs:
        call["epsilon"] = 1e-6
    return fn(**call)[0]


def largest_advantage_difference(name: str) -> float:
    """max over SEEDS batches and tokens of |verl's advantage - the dial's|."""
    kwargs, spec, min_size = ESTIMATORS[name]
    dial = dial_from_config(spec)
    worst = 0.0
    for seed in SEEDS:
        batch = random_batch(seed, min_size)
        theirs = _verl_advantages(name, kwargs, batch)  # (N, T)
        ours = advantages(batch.rewards, batch.group_ids, dial, **_context(dial, batch))
        worst = max(worst, float((theirs - ours[:, None] * batch.mask).abs().max()))
    return worst


def _context(dial, batch) -> dict:
    from grpo_dial.core.estimators import active_estimators

    needs = {n for e in active_estimators(dial) for n in e.needs}
    return {"lengths": batch.lengths} if "lengths" in needs else {}


@pytest.mark.parametrize("name", list(ESTIMATORS))
def test_verl_advantage_estimators_equal_the_dial(name):
    assert largest_advantage_difference(name) < TOL


def test_the_singleton_convention_is_what_differs_without_it():
    """Fails on the bug it guards: verl's grpo with our default lone response (A = 0) differs
    exactly on the groups of one."""
    batch = random_batch(5)  # has a group of one
    theirs = _verl_advantages("grpo", {"norm_adv_by_std_in_grpo": True}, batch)
    ours = advantages(batch.rewards, batch.group_ids, dial_from_config({"std_ddof": 1}))
    diff = (theirs - ours[:, None] * batch.mask).abs().amax(1)  # (N,)
    alone = torch.tensor([(batch.group_ids == i).sum() == 1 for i in batch.group_ids])
    assert alone.any() and (diff[~alone] < TOL).all()
    assert (diff[alone & (batch.rewards != 0) & (batch.lengths > 0)] > 0.1).all()


# verl loss_agg_mode -> (agg_loss keywords, the dial's aggregation fields)
AGGREGATIONS = {
    "token-mean": ({}, {"length_norm": "token"}),
    "token-sum": ({}, {"length_norm": "sum"}),
    "seq-mean-token-sum": ({}, {"length_norm": "sequence_sum", "empty_rows": "skip"}),
    "seq-mean-token-mean": ({}, {"length_norm": "sequence", "empty_rows": "skip"}),
    "seq-mean-token-sum-norm": ({}, {"length_norm": "constant", "empty_rows": "skip"}),
    "seq-mean-token-sum-norm (loss_scale_factor 40)": (
        {"loss_scale_factor": 40}, {"length_norm": "constant", "max_length": 40,
                                    "empty_rows": "skip"}),
}  # fmt: skip


def largest_aggregation_difference(mode: str) -> float:
    """max over SEEDS of |agg_loss - the dial's weighted sum| of random token losses."""
    kwargs, spec = AGGREGATIONS[mode]
    weights = make_token_weights(dial_from_config(spec))
    worst = 0.0
    for seed in SEEDS:
        batch = random_batch(seed)
        loss = torch.randn(batch.mask.shape, dtype=torch.float64,
                           generator=torch.Generator().manual_seed(seed))  # fmt: skip
        theirs = CA.agg_loss(loss, batch.mask, mode.split(" ")[0], **kwargs)
        ours = weighted_sum(loss, weights(batch.mask))
        worst = max(worst, abs(float(theirs) - float(ours)))
    return worst


@pytest.mark.parametrize("mode", list(AGGREGATIONS))
def test_verl_agg_loss_equals_the_dial(mode):
    assert largest_aggregation_difference(mode) < TOL


def test_counting_empty_responses_is_what_differs_without_skip():
    batch = random_batch(3)
    assert (batch.lengths == 0).any()
    loss = torch.ones_like(batch.mask)
    theirs = CA.agg_loss(loss, batch.mask, "seq-mean-token-mean")  # 1 over nonempty rows
    counted = weighted_sum(loss, make_token_weights(dial_from_config({}))(batch.mask))
    nonempty = int((batch.lengths > 0).sum())
    assert float(theirs) == pytest.approx(1.0)
    assert float(counted) == pytest.approx(nonempty / len(batch.lengths))


def _actor(low: float, high: float):
    from verl.workers.config import ActorConfig

    return ActorConfig(
        strategy="fsdp", clip_ratio=low, clip_ratio_low=low, clip_ratio_high=high,
        ppo_micro_batch_size_per_gpu=4, rollout_n=4,
    )  # fmt: skip


# verl policy loss (loss_mode, loss_agg_mode) -> the dial
POLICY_LOSSES = {
    ("vanilla", "token-mean"): {"preset": "dapo", "silent": "keep"},
    ("vanilla", "seq-mean-token-mean"): {"empty_rows": "skip", "clip_high": 0.28},
    ("gspo", "seq-mean-token-mean"): {"preset": "gspo", "empty_rows": "skip"},
    ("gspo", "token-mean"): {"preset": "gspo", "length_norm": "token"},
    ("gspo", "seq-mean-token-sum"): {"preset": "luspo", "clip_low": 3e-4, "clip_high": 4e-4,
                                     "empty_rows": "skip"},
}  # fmt: skip


def largest_policy_loss_difference(key: tuple[str, str]) -> tuple[float, float]:
    """max over SEEDS of |verl's loss - ours| and of the largest gradient difference."""
    mode, agg = key
    dial = dial_from_config(POLICY_LOSSES[key])
    fn = CA.get_policy_loss_fn(mode)
    worst, worst_grad = 0.0, 0.0
    for seed in SEEDS:
        batch = random_batch(seed)
        logp, old = token_losses(seed, batch)
        if dial.ratio_level == "sequence":  # GSPO's range is small: ratios near it
            logp = old + (logp - old) * 1e-3
        adv = advantages(batch.rewards, batch.group_ids, dial_from_config({"std_ddof": 1}))
        mine = logp.clone().requires_grad_(True)
        theirs_logp = logp.clone().requires_grad_(True)
        theirs, _ = fn(old, theirs_logp, adv[:, None] * batch.mask, batch.mask, agg,
                       _actor(dial.clip_low, dial.clip_high))  # fmt: skip
        ours = policy_loss(mine, old, adv, batch.mask, dial)
        theirs.backward()
        ours.backward()
        worst = max(worst, abs(float(theirs) - float(ours)))
        gap = (theirs_logp.grad - mine.grad) * batch.mask
        worst_grad = max(worst_grad, float(gap.abs().max()))
    return worst, worst_grad


@pytest.mark.parametrize("key", list(POLICY_LOSSES), ids=lambda k: "-".join(k))
def test_verl_policy_losses_and_gradients_equal_the_dial(key):
    loss, grad = largest_policy_loss_difference(key)
    assert loss < TOL and grad < TOL


def test_index_is_any_hashable_in_verl_and_any_integer_here():
    batch = random_batch(11)
    as_text = np.array([f"uid-{i}" for i in batch.group_ids.tolist()], dtype=object)
    scores = torch.zeros_like(batch.mask)
    scores[:, 0] = batch.rewards
    theirs = CA.get_adv_estimator_fn("rloo")(scores, batch.mask, as_text)[0]
    ours = advantages(
        batch.rewards, batch.group_ids, dial_from_config({"preset": "rloo", **SINGLE})
    )
    assert float((theirs - ours[:, None] * batch.mask).abs().max()) < TOL


# --------------------------------------------------------------------------- float32
# verl's reward tensors are float32. Where a group's rewards differ, the dial in float32 equals
# verl in float32 to float32 rounding. Where they are all equal (sigma = 0) verl still divides
# (r - mean) / (std + eps): a reward binary cannot hold leaves mean and std a few ulps off, so
# every response of the silent group gets |A| far from 0, while the dial gives exactly 0 in
# either dtype (docs/estimators.md, "float32"; grpo-dial diagnose warns where a log shows it).
FLOAT32_SILENT = {  # reward -> verl grpo's largest |A| of a silent group, G = 8, 12, 16 (eps 1e-6)
    0.1: (0.0074, 0.015, 0.0074), 0.2: (0.015, 0.029, 0.015), 0.3: (0.029, 0.029, 0.029),
    0.6: (0.056, 0.056, 0.056), 0.7: (0.056, 0.11, 0.056), 0.95: (0.056, 0.11, 0.056),
    0.5: (0.0, 0.0, 0.0),
}  # fmt: skip


def _silent_verl(reward: float, size: int) -> float:
    scores = torch.zeros(size, 3, dtype=torch.float32)
    scores[:, 2] = reward
    adv = CA.compute_grpo_outcome_advantage(
        token_level_rewards=scores, response_mask=torch.ones_like(scores),
        index=np.zeros(size, dtype=np.int64), epsilon=1e-6, norm_adv_by_std_in_grpo=True,
    )[0]  # fmt: skip
    return float(adv.abs().max())


@pytest.mark.parametrize("reward", list(FLOAT32_SILENT))
def test_verl_float32_silent_groups_get_advantages_the_dial_does_not(reward):
    dial = dial_from_config({"std_ddof": 1, **SINGLE})
    for size, expected in zip((8, 12, 16), FLOAT32_SILENT[reward], strict=True):
        assert _silent_verl(reward, size) == pytest.approx(expected, rel=0.05, abs=1e-12)
        for dtype in (torch.float32, torch.float64):
            ours = advantages(torch.full((size,), reward, dtype=dtype),
                              torch.zeros(size, dtype=torch.long), dial)  # fmt: skip
            assert float(ours.abs().max()) == 0.0


@pytest.mark.parametrize("name", ["grpo", "grpo_vectorized", "rloo", "opo", "gpg"])
def test_verl_in_float32_equals_the_dial_in_float32_off_silent_groups(name):
    kwargs, spec, min_size = ESTIMATORS[name]
    dial = dial_from_config(spec)
    worst = 0.0
    for seed in SEEDS:
        batch = random_batch(seed, min_size)
        batch = type(batch)(batch.rewards.float(), batch.group_ids, batch.mask.float(),
                            batch.lengths)  # fmt: skip
        theirs = _verl_advantages(name, kwargs, batch).double()  # (N, T)
        ours = advantages(batch.rewards, batch.group_ids, dial, **_context(dial, batch))
        assert ours.dtype == torch.float32  # the dial computes in the rewards' dtype
        stats = {int(i): batch.rewards[batch.group_ids == i] for i in batch.group_ids.unique()}
        silent = torch.tensor([bool((stats[int(i)] == stats[int(i)][0]).all())
                               for i in batch.group_ids])  # fmt: skip
        diff = (theirs - ours.double()[:, None] * batch.mask.double()).abs().amax(1)  # (N,)
        worst = max(worst, float(diff[~silent].max()) if (~silent).any() else 0.0)
    assert worst < 2e-6

"""Sampling responses from the policy and their log-probabilities for the update.

`sample` draws groups of responses (`generate_groups`); `rollouts` holds them (`Rollouts`,
`concat`); `logprobs` computes log pi(o_t | x, o_<t) of what was sampled (`response_logprobs`,
on length buckets from `plan_buckets`; `bucket_logprobs` one bucket at a time);
`generic_forward` is the transformers calling conventions both use for models the lean
forward does not cover.
"""

from grpo_dial.policy.rollout.logprobs import (
    FORWARD_OVERHEAD_TOKENS,
    bucket_logprobs,
    plan_buckets,
    response_logprobs,
)
from grpo_dial.policy.rollout.rollouts import Rollouts, concat
from grpo_dial.policy.rollout.sample import decode_texts, eos_ids, generate_groups

__all__ = [
    "FORWARD_OVERHEAD_TOKENS",
    "Rollouts",
    "bucket_logprobs",
    "concat",
    "decode_texts",
    "eos_ids",
    "generate_groups",
    "plan_buckets",
    "response_logprobs",
]

"""Measured peak memory of the update and the sampler on the CPU, against policy.memory.

A random Llama sized like SmolLM2-135M (`smollm2_shaped`, fewer layers or a smaller vocabulary
for quick checks), random rollouts of fixed lengths (`random_rollouts`), and the peaks
`PeakMemory` measures: one bucket's forward + backward (`bucket_peak`), a whole policy_update
(`update_peak`, the trainer's own, backward per bucket), a decode call (`sampler_peak`).
`micro_batch_table` is the table in docs/performance.md.
"""

from __future__ import annotations

import copy
from dataclasses import replace

import torch

from grpo_dial.core.dial import preset
from grpo_dial.policy import memory
from grpo_dial.policy.model import autocast
from grpo_dial.policy.rollout import Rollouts, response_logprobs
from grpo_dial.tools.bench.memory import PeakMemory


def smollm2_shaped(layers: int = 30, vocab: int = 49152, hidden: int = 576):
    """A LlamaConfig with SmolLM2-135M's widths (9 heads, 3 key/value heads, MLP 1536 at
    hidden 576, tied embeddings); `layers`, `vocab` and `hidden` smaller for quick checks."""
    from transformers import LlamaConfig

    return LlamaConfig(
        vocab_size=vocab, hidden_size=hidden, intermediate_size=hidden * 8 // 3,
        num_hidden_layers=layers, num_attention_heads=hidden // 64,
        num_key_value_heads=max(1, hidden // 192), tie_word_embeddings=True,
        max_position_embeddings=2048, attn_implementation="sdpa",
    )  # fmt: skip


def random_model(config, seed: int = 0) -> torch.nn.Module:
    from transformers import LlamaForCausalLM

    torch.manual_seed(seed)
    return LlamaForCausalLM(config).eval()


def random_rollouts(
    rows: int, prompt_len: int, response_len: int, vocab: int, group_size: int = 1, seed: int = 0
) -> Rollouts:
    """rows responses of exactly response_len tokens after prompts of prompt_len tokens, groups
    of group_size rows sharing a prompt."""
    gen = torch.Generator().manual_seed(seed)
    prompts = torch.randint(3, vocab, (-(-rows // group_size), prompt_len), generator=gen)
    prompt = prompts.repeat_interleave(group_size, 0)[:rows]  # (N, P)
    response = torch.randint(3, vocab, (rows, response_len), generator=gen)  # (N, T)
    return Rollouts(
        problems=[None] * rows, group_ids=torch.arange(rows) // group_size,
        prompt_ids=prompt, prompt_mask=torch.ones_like(prompt), response_ids=response,
        response_mask=torch.ones_like(response), finished=torch.ones(rows, dtype=torch.bool),
        texts=[""] * rows,
    )  # fmt: skip


def bucket_peak(model, rollouts: Rollouts, precision: str = "fp32") -> int:
    """Peak bytes of one forward + backward of all rows, gradients already allocated."""
    for p in model.parameters():
        p.grad = torch.zeros_like(p)
    peak = PeakMemory("cpu")
    peak.start()
    with autocast(precision, "cpu"):
        logp = response_logprobs(model, rollouts)  # (N, T)
    logp.sum().backward()
    del logp
    return peak.stop()


def update_peak(model, rollouts: Rollouts, micro_batch: int | None, precision: str = "fp32"):
    """Peak bytes of the trainer's policy_update (AdamW, backward per bucket of micro_batch
    rows) above the fp32 weights and AdamW moments (a first update allocates them): the
    gradients (4 B per parameter) and the largest bucket."""
    from grpo_dial.train.config import TrainConfig
    from grpo_dial.train.step import make_optimizer, policy_update

    model = copy.deepcopy(model)
    config = replace(TrainConfig(progress=False), micro_batch=micro_batch, precision=precision)
    optimizer = make_optimizer(model, config)
    adv = torch.linspace(-1.0, 1.0, len(rollouts))  # (N,) every row carries a gradient
    policy_update(model, optimizer, rollouts, adv, preset("grpo"), config)
    optimizer.zero_grad(set_to_none=True)
    peak = PeakMemory("cpu")
    peak.start()
    policy_update(model, optimizer, rollouts, adv, preset("grpo"), config)
    return peak.stop()


def sampler_peak(model, prompts: int, group_size: int, prompt_len: int, new_tokens: int,
                 precision: str = "fp32") -> int:  # fmt: skip
    """Peak bytes of one decode call (no EOS: every row runs new_tokens tokens)."""
    from grpo_dial.policy.rollout.sample import _decode

    vocab = model.config.vocab_size
    prompt = torch.randint(3, vocab, (prompts, prompt_len), generator=torch.Generator())
    counts = torch.full((prompts,), group_size)
    gen = torch.Generator().manual_seed(0)
    peak = PeakMemory("cpu")
    peak.start()
    with torch.inference_mode(), autocast(precision, "cpu"):
        eos = torch.tensor([vocab + 1])  # never sampled
        _decode(model, prompt, torch.ones_like(prompt), counts, new_tokens, 1.0, gen, eos, 0)
    return peak.stop()


def micro_batch_table(
    config, rows: int, prompt_len: int, response_len: int, micro_batches, precision="fp32",
    group_size: int = 8,
) -> list[dict]:  # fmt: skip
    """Measured and predicted update peaks (bytes above weights and moments: gradients and
    the largest bucket) per micro_batch on one random model of `config`."""
    model = random_model(config)
    ro = random_rollouts(rows, prompt_len, response_len, config.vocab_size, group_size)
    shape = memory.Shape.of(config)
    out = []
    for mb in micro_batches:
        measured = update_peak(model, ro, mb, precision)
        u = -(-min(mb, rows) // group_size)
        predicted = 4 * shape.params + memory.bucket_bytes(
            shape, min(mb, rows), prompt_len, response_len, precision, u
        )
        out.append({"micro_batch": mb, "measured": measured, "predicted": predicted})
    return out

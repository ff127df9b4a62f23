"""The device check's memory parts: decoding (3) and the update (4), each beside policy.memory.

3. `decode`: the sampler's decode loop (`rollout.sample._decode`, the lean Llama path) on a
   SmolLM2-shaped random model, at the training sampler's shape (generation_batch rows of G
   samples per prompt) and the pass-rate sampler's, prompts left-padded to at most PROMPT_LEN
   tokens, every row running max_new_tokens (no end-of-sequence is ever drawn: the memory model's
   worst case); generated tokens / s and peak memory (weights included) against
   `memory.sampler_bytes`, at several `alive_check_every` (how often the loop reads the number of
   live rows: a host sync).
4. `update`: the trainer's `policy_update` (AdamW, one backward per length bucket) on
   prompts_per_step x G rows with prompt and response lengths spread like real ones and rewards
   half right, half wrong in every group (every group mixed: every row carries a gradient and
   is forwarded); per bucket its rows, distinct prompts and lengths, its measured peak (above the
   weights and AdamW moments, so with the 4 B / parameter of gradients) against
   `4 params + memory.bucket_bytes` for exactly that bucket, fused (what the memory model
   assumes on CUDA) and not fused (if the math kernel runs); the whole update's peak and
   prompt + response tokens / s; at two micro_batch values, with and without gradient
   checkpointing.
"""

from __future__ import annotations

from dataclasses import replace
from functools import partial

import torch

from grpo_dial.policy import memory
from grpo_dial.tools.device_env import Device, Shapes, cuda_only, gib, mib, put, ratio


def _prompts(vocab: int, m: int, width: int, device: Device, seed: int):
    """(ids, mask) (m, width): left-padded prompts of width/4..width real tokens."""
    gen = torch.Generator().manual_seed(seed)
    ids = torch.randint(3, vocab, (m, width), generator=gen)
    lengths = torch.randint(max(1, width // 4), width + 1, (m,), generator=gen)
    mask = (torch.arange(width)[None] >= (width - lengths)[:, None]).long()
    return (ids * mask).to(device.name), mask.to(device.name)


def _sample(model, prompt, p_mask, counts, new_tokens, eos, precision, check_every):
    """One decode call of the sampler (no end-of-sequence): (ids, mask, finished)."""
    from grpo_dial.policy.model import autocast
    from grpo_dial.policy.rollout.sample import _decode

    device = prompt.device
    gen = torch.Generator(device=device).manual_seed(0)
    with torch.inference_mode(), autocast(precision, str(device)):
        return _decode(model, prompt, p_mask, counts, new_tokens, 1.0, gen, eos, 0, None,
                       check_every)  # fmt: skip


def decode(shapes: Shapes, device: Device, tiny: bool, check) -> dict:
    """Both samplers' shapes, each on its own (`check(name, fn)`: an out-of-memory at the
    pass-rate sampler's 512 rows keeps the training sampler's numbers)."""
    from grpo_dial.tools.device_env import smollm2_model

    model = smollm2_model(device, tiny)
    cases = {
        "sampler": (shapes.generation_batch, shapes.group_size, shapes.max_new_tokens,
                    shapes.alive_every),
        "passrate_sampler": (shapes.passrate_rows, shapes.passrate_group,
                             shapes.passrate_new_tokens, shapes.alive_every[1:2]),
    }  # fmt: skip
    out: dict = {"precision": shapes.precision, "prompt_len": shapes.prompt_len}
    for name, case in cases.items():
        out[name] = check(name, partial(_decode_case, model, shapes, device, *case))
        device.free()
    del model
    device.free()
    return out


def _decode_case(model, shapes: Shapes, device: Device, rows, g, new_tokens, every) -> dict:
    shape = memory.Shape.of(model.config)
    vocab = model.config.vocab_size
    eos = torch.tensor([vocab + 1], device=device.name)  # never drawn: every row runs to the end
    m = max(1, rows // g)
    prompt, p_mask = _prompts(vocab, m, shapes.prompt_len, device, seed=1)
    counts = torch.full((m,), g, device=device.name)
    predicted = memory.sampler_bytes(shape, m * g, shapes.prompt_len, new_tokens, None,
                                     shapes.precision, g)  # fmt: skip
    case: dict = {"rows": m * g, "group_size": g, "new_tokens": new_tokens, "runs": []}
    put(case, "predicted_peak_gib", gib(predicted["peak"]))
    run = partial(_sample, model, prompt, p_mask, counts, new_tokens, eos, shapes.precision)
    run(every[0])  # warm-up: kernels, allocator
    why = cuda_only(device.name)
    for check_every in every:
        seconds, peak, result = device.timed(partial(run, check_every))
        tokens = int(result[1].sum())
        measured = None if peak is None else peak + 4 * shape.params
        entry = {"alive_check_every": check_every, "decode_seconds": round(seconds, 3),
                 "tokens": tokens, "tokens_per_s": round(tokens / seconds, 1)}  # fmt: skip
        put(entry, "peak_gib", gib(measured), why)
        put(entry, "predicted_over_measured", ratio(predicted["peak"], measured), why)
        case["runs"].append(entry)
    return case


# --------------------------------------------------------------------------- the update


def mixed_rollouts(shapes: Shapes, vocab: int, device: Device, seed: int = 0):
    """(rollouts, rewards): prompts_per_step prompts x G responses, prompt lengths spread over
    PROMPT_LEN/4..PROMPT_LEN, response lengths over max_new_tokens/8..max_new_tokens; in each
    group the first half of the rows is right (1), the rest wrong (0)."""
    from grpo_dial.policy.rollout import Rollouts

    g, m, t = shapes.group_size, shapes.prompts_per_step, shapes.max_new_tokens
    prompt, p_mask = _prompts(vocab, m, shapes.prompt_len, device, seed)
    gen = torch.Generator().manual_seed(seed + 1)
    n = m * g
    lengths = torch.randint(max(1, t // 8), t + 1, (n,), generator=gen)
    response = torch.randint(3, vocab, (n, t), generator=gen)
    r_mask = (torch.arange(t)[None] < lengths[:, None]).long()
    owner = torch.arange(m, device=device.name).repeat_interleave(g)  # (N,)
    rewards = (torch.arange(n) % g < max(1, g // 2)).float()  # (N,) mixed in every group
    rollouts = Rollouts(
        problems=[None] * n, group_ids=owner, prompt_ids=prompt[owner], prompt_mask=p_mask[owner],
        response_ids=(response * r_mask).to(device.name), response_mask=r_mask.to(device.name),
        finished=(lengths < t).to(device.name), texts=[""] * n,
    )  # fmt: skip
    return rollouts, rewards


class BucketSpy:
    """Wraps `bucket_logprobs` inside policy_update: each bucket's rows, distinct prompts and
    lengths, and its peak memory from the start of its forward to the end of its backward (the
    next bucket's request), above the update's starting allocation."""

    def __init__(self, device: Device, original) -> None:
        self.device, self.original = device, original
        self.buckets: list[dict] = []
        self.base = 0

    def __call__(self, model, rollouts, micro_batch):
        inner = self.original(model, rollouts, micro_batch)
        while True:
            self.device.start()
            item = next(inner, None)
            if item is None:
                return
            rows, logp = item
            prompt = torch.cat([rollouts.prompt_ids[rows], rollouts.prompt_mask[rows]], 1)
            self.buckets.append({
                "rows": len(rows),
                "unique_prompts": int(torch.unique(prompt, dim=0).shape[0]),
                "prompt_len": int(rollouts.prompt_mask[rows].sum(1).max()),
                "response_len": int(logp.shape[1]),
            })  # fmt: skip
            yield item
            self.buckets[-1]["peak"] = self.device.peak(self.base)


def _bucket_report(bucket: dict, shape, precision: str, checkpointing: bool, device: Device):
    args = (shape, bucket["rows"], bucket["prompt_len"], bucket["response_len"], precision,
            bucket["unique_prompts"], checkpointing)  # fmt: skip
    fused = 4 * shape.params + memory.bucket_bytes(*args, fused=True)
    unfused = 4 * shape.params + memory.bucket_bytes(*args, fused=False)
    out = {k: bucket[k] for k in ("rows", "unique_prompts", "prompt_len", "response_len")}
    why = cuda_only(device.name)
    put(out, "measured_mib", mib(bucket.get("peak")), why)
    out["predicted_fused_mib"], out["predicted_unfused_mib"] = mib(fused), mib(unfused)
    put(out, "fused_over_measured", ratio(fused, bucket.get("peak")), why)
    put(out, "unfused_over_measured", ratio(unfused, bucket.get("peak")), why)
    return out


def update(shapes: Shapes, device: Device, tiny: bool, check) -> dict:
    """Every (micro_batch, checkpointing) on its own (`check(name, fn)`: an out-of-memory at
    micro_batch 64 keeps the others' numbers)."""
    from grpo_dial.core.advantage import advantages
    from grpo_dial.core.dial import preset
    from grpo_dial.policy.model import enable_gradient_checkpointing
    from grpo_dial.tools.device_env import smollm2_model
    from grpo_dial.train import step
    from grpo_dial.train.config import TrainConfig

    model = smollm2_model(device, tiny)
    rollouts, rewards = mixed_rollouts(shapes, model.config.vocab_size, device)
    dial = preset("grpo")
    adv = advantages(rewards, rollouts.group_ids.cpu(), dial)  # (N,)
    base = TrainConfig(device=device.name, precision=shapes.precision, progress=False, lr=1e-6)
    optimizer = step.make_optimizer(model, base)
    tokens = int(rollouts.prompt_mask.sum() + rollouts.response_mask.sum())
    params = sum(p.numel() for p in model.parameters())
    out: dict = {
        "params_m": round(params / 1e6, 2), "rows": len(rollouts), "tokens": tokens,
        "mixed_groups": int((adv != 0).sum()) == len(rollouts), "precision": shapes.precision,
        "runs": [],
    }  # fmt: skip
    first = replace(base, micro_batch=shapes.micro_batches[0])
    step.policy_update(model, optimizer, rollouts, adv, dial, first)  # warm-up; AdamW state
    for checkpointing in (False, True):
        if checkpointing:
            enable_gradient_checkpointing(model)
        for mb in shapes.micro_batches:
            cfg = replace(base, micro_batch=mb, gradient_checkpointing=checkpointing)
            run = partial(_update_run, model, optimizer, rollouts, adv, dial, cfg, device, tokens)
            name = f"micro_batch {mb}{' checkpointing' if checkpointing else ''}"
            entry = check(name, run)
            out["runs"].append({"micro_batch": mb, "checkpointing": checkpointing, **entry})
            optimizer.zero_grad(set_to_none=True)
            device.free()
    del model, optimizer, rollouts
    device.free()
    return out


def _update_run(model, optimizer, rollouts, adv, dial, cfg, device: Device, tokens) -> dict:
    """One measured policy_update: per bucket (`BucketSpy`) and whole."""
    from grpo_dial.train import step

    shape = memory.Shape.of(model.config)
    checkpointing, precision = cfg.gradient_checkpointing, cfg.precision
    original = step.bucket_logprobs
    spy = BucketSpy(device, original)
    step.bucket_logprobs = spy
    try:
        optimizer.zero_grad(set_to_none=True)
        spy.base = device.start()
        update = partial(step.policy_update, model, optimizer, rollouts, adv, dial, cfg)
        seconds, _, result = device.timed(update)
    finally:
        step.bucket_logprobs = original
    peak = None  # the whole update: every bucket, then clipping and AdamW's step
    if device.cuda:
        after = device.max_allocated() - spy.base
        peak = max([after] + [b["peak"] for b in spy.buckets])
    buckets = [_bucket_report(b, shape, precision, checkpointing, device) for b in spy.buckets]
    worst = max(memory.bucket_bytes(shape, b["rows"], b["prompt_len"], b["response_len"],
                                    precision, b["unique_prompts"], checkpointing, device.cuda)
                for b in spy.buckets)  # fmt: skip
    entry = {"update_seconds": round(seconds, 3), "tokens_per_s": round(tokens / seconds, 1),
             "finite": bool(result.finite), "buckets": buckets}  # fmt: skip
    put(entry, "peak_above_static_gib", gib(peak), cuda_only(device.name))
    put(entry, "predicted_above_static_gib", gib(4 * shape.params + worst))
    entry["predicted_update_peak_gib"] = gib(16 * shape.params + worst)
    return entry

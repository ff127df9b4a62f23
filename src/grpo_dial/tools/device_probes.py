"""The device check's first two parts: versions and SDPA kernels (1), forward parity (2).

1. `versions`: Python, torch, CUDA, cuDNN, transformers, the GPU. `sdpa_backends`: for each
   attention shape of config/gpu.yaml as the lean forward (`policy.lean_llama._attend`) calls
   it -- queries (B, H, T, hd) in the compute dtype, keys and values (B, H_kv, S, hd) with
   grouped heads (enable_gqa), a boolean mask (B, 1, T, S) (True = attend) -- which of the
   flash, memory-efficient, cuDNN and math kernels accepts it when it is the only one allowed
   (`torch.nn.attention.sdpa_kernel`), with its time (forward, and backward for the update's
   shapes; median of 3 after a warm-up) and peak memory, the reason torch gives for refusing,
   and which kernel torch picks by itself (`torch._fused_sdp_choice`).
2. `parity`: on one left-padded batch of a SmolLM2-shaped random model, the lean forward with
   SDPA (the CUDA path), the lean forward with its two matmuls (the CPU path) and the model's own
   forward: largest differences of logits and token log-probs at real positions, and relative
   differences of the gradients of the summed log-probs, in fp32 and under bf16 autocast; and
   bf16 against fp32 log-probs (mean and max per token).
"""

from __future__ import annotations

import contextlib
import platform
import statistics
import warnings
from functools import partial

import torch
import torch.nn.functional as F

from grpo_dial.policy import lean_llama
from grpo_dial.policy.model import autocast
from grpo_dial.tools.device_env import Device, Shapes, cuda_only, mib, one_line, put

BACKENDS = {"flash": "FLASH_ATTENTION", "efficient": "EFFICIENT_ATTENTION",
            "cudnn": "CUDNN_ATTENTION", "math": "MATH"}  # fmt: skip


def versions(device: Device) -> dict:
    import numpy
    import transformers

    out = {"python": platform.python_version(), "torch": torch.__version__,
           "transformers": transformers.__version__, "numpy": numpy.__version__}  # fmt: skip
    cuda_why = f"torch sees no CUDA device here (run on {device.name})"
    put(out, "cuda", torch.version.cuda, "this torch build has no CUDA")
    cudnn = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
    put(out, "cudnn", cudnn, "cuDNN is not available to this torch")
    gpu = device.cuda and torch.cuda.is_available()
    props = torch.cuda.get_device_properties(torch.device(device.name)) if gpu else None
    put(out, "gpu_name", props.name if gpu else None, cuda_why)
    put(out, "gpu_capability", f"{props.major}.{props.minor}" if gpu else None, cuda_why)
    put(out, "gpu_memory_gib", round(props.total_memory / 2**30, 1) if gpu else None, cuda_why)
    put(out, "gpu_count", torch.cuda.device_count() if gpu else None, cuda_why)
    out["cpu_threads"] = torch.get_num_threads()
    return out


def attention_shapes(shapes: Shapes, heads: int, kv_heads: int, head_dim: int) -> dict:
    """name -> (B, H, H_kv, T, S, hd, backward, masked): the update's prompt segment (one
    distinct prompt per group of a micro-batch) and response segment (micro-batch rows of
    max_new_tokens - 1 queries on prompt + response keys), a training decode step with padded
    prompts (mask) and without (no mask), and the pass-rate sampler's decode step."""
    mb, g = shapes.micro_batches[0], shapes.group_size
    p, t = shapes.prompt_len, shapes.max_new_tokens
    s_dec = p + t - 1
    s_rate = p + shapes.passrate_new_tokens - 1
    h, k, d = heads, kv_heads, head_dim
    return {
        "update_prompt": (max(1, mb // g), h, k, p, p, d, True, True),
        "update_response": (mb, h, k, t - 1, p + t - 1, d, True, True),
        "decode_masked": (shapes.generation_batch, h, k, 1, s_dec, d, False, True),
        "decode_unmasked": (shapes.generation_batch, h, k, 1, s_dec, d, False, False),
        "passrate_decode": (shapes.passrate_rows, h, k, 1, s_rate, d, False, True),
    }


def _inputs(spec, dtype, device: Device):
    b, h, k, t, s, d, backward, masked = spec
    gen = torch.Generator(device=device.name).manual_seed(0)
    q = torch.randn((b, h, t, d), generator=gen, device=device.name, dtype=dtype)
    keys = torch.randn((b, k, s, d), generator=gen, device=device.name, dtype=dtype)
    values = torch.randn((b, k, s, d), generator=gen, device=device.name, dtype=dtype)
    mask = None
    if masked:  # left padding of up to a quarter of the prompt, causal over the last t keys
        pad = torch.randint(0, max(1, (s - t) // 4), (b,), generator=gen, device=device.name)
        key_mask = torch.arange(s, device=device.name)[None] >= pad[:, None]  # (B, S)
        mask = lean_llama.attend_mask(key_mask, t)  # (B, 1, T, S)
    if backward:
        q, keys, values = (x.requires_grad_() for x in (q, keys, values))
    return q, keys, values, mask, backward


def _attention(q, keys, values, mask, backward: bool):
    """The lean forward's attention call (and its backward for the update's shapes)."""
    o = F.scaled_dot_product_attention(q, keys, values, attn_mask=mask, enable_gqa=True)
    if backward:
        o.float().sum().backward()
    return o


def _choice(q, keys, values, mask) -> str | None:
    """The kernel torch picks with every backend allowed (a private torch function)."""
    from torch.nn.attention import SDPBackend

    index = torch._fused_sdp_choice(q, keys, values, mask, 0.0, False, enable_gqa=True)
    names = {int(member.value): name for name, member in SDPBackend.__members__.items()}
    return names.get(int(index), str(index))


def sdpa_backends(shapes: Shapes, device: Device, heads: int, kv_heads: int, head_dim: int):
    from torch.nn.attention import SDPBackend, sdpa_kernel

    dtype = torch.bfloat16 if shapes.precision == "bf16" else torch.float32
    out: dict = {"dtype": str(dtype).removeprefix("torch."), "shapes": {}}
    for name, spec in attention_shapes(shapes, heads, kv_heads, head_dim).items():
        q, keys, values, mask, backward = _inputs(spec, dtype, device)
        row = {"q": list(q.shape), "kv": list(keys.shape), "mask": mask is not None,
               "backward": backward, "backends": {}}  # fmt: skip
        try:
            put(row, "default_choice", _choice(q, keys, values, mask))
        except Exception as error:  # a private function: absent or changed in this torch
            put(row, "default_choice", None, one_line(error))
        call = partial(_attention, q, keys, values, mask, backward)

        for label, member in BACKENDS.items():
            entry: dict = {}
            caught: list = []
            try:
                with warnings.catch_warnings(record=True) as caught, sdpa_kernel(
                    [getattr(SDPBackend, member)]
                ):
                    warnings.simplefilter("always")
                    call()  # warm-up; raises when the kernel refuses
                    runs = [device.timed(call)[:2] for _ in range(3)]
                entry["accepted"] = True
                entry["ms"] = round(1000 * statistics.median(r[0] for r in runs), 3)
                put(entry, "peak_mib", mib(max(r[1] for r in runs) if device.cuda else None),
                    cuda_only(device.name))  # fmt: skip
            except Exception as error:  # refused (RuntimeError) or out of memory
                why = [str(w.message).splitlines()[0] for w in caught
                       if "kernel" in str(w.message) or "because" in str(w.message)]
                entry["accepted"] = False
                entry["reason"] = "; ".join([*why, one_line(error)])[:600]
            row["backends"][label] = entry
        out["shapes"][name] = row
        del q, keys, values, mask
        device.free()
    return out


# --------------------------------------------------------------------------- parity


@contextlib.contextmanager
def _sdpa_on(kinds: tuple[str, ...]):
    """lean_llama's attention: fused SDPA on device kinds `kinds`, the two matmuls elsewhere."""
    saved = lean_llama.SDPA_DEVICES
    lean_llama.SDPA_DEVICES = kinds
    try:
        yield
    finally:
        lean_llama.SDPA_DEVICES = saved


def parity_batch(vocab: int, device: Device, rows: int, width: int, seed: int = 0):
    """(ids, key_mask) (rows, width): left padding of 0..width/4 tokens per row."""
    gen = torch.Generator().manual_seed(seed)
    ids = torch.randint(3, vocab, (rows, width), generator=gen)
    pad = torch.randint(0, width // 4 + 1, (rows,), generator=gen)
    mask = (torch.arange(width)[None] >= pad[:, None]).long()
    return ids.to(device.name), mask.to(device.name)


def _logits_and_grads(model, path: str, ids, mask, precision: str, device: Device):
    """(logits (B, S, V) float, token log-probs (B, S-1), gradients by name) of one path."""
    model.zero_grad(set_to_none=True)
    pos = (mask.cumsum(1) - 1).clamp(min=0)
    with autocast(precision, device.name):
        if path == "model":
            logits = model(input_ids=ids, attention_mask=mask, position_ids=pos).logits
        else:
            kinds = (device.type,) if path == "lean_sdpa" else ()
            with _sdpa_on(kinds):
                logits, _ = lean_llama.forward(model, ids, pos, mask)
    logits = logits.float()
    real = (mask[:, 1:] * mask[:, :-1]).bool()  # (B, S-1) a real token predicting a real one
    logp = logits[:, :-1].log_softmax(-1).gather(-1, ids[:, 1:, None]).squeeze(-1)
    logp = torch.where(real, logp, 0.0)
    logp.sum().backward()
    grads = {n: p.grad.detach().clone() for n, p in model.named_parameters()}
    model.zero_grad(set_to_none=True)
    return logits.detach(), logp.detach(), grads


def _compare(a, b, mask) -> dict:
    la, pa, ga = a
    lb, pb, gb = b
    real = mask.bool()
    num = sum(float((ga[n] - gb[n]).double().norm() ** 2) for n in gb) ** 0.5
    den = sum(float(gb[n].double().norm() ** 2) for n in gb) ** 0.5
    worst = max(float((ga[n] - gb[n]).norm() / gb[n].norm().clamp_min(1e-30)) for n in gb)
    return {
        "logits_max_abs": float((la - lb)[real].abs().max()),
        "logprob_max_abs": float((pa - pb).abs().max()),
        "grad_rel": num / max(den, 1e-30),
        "grad_rel_worst_tensor": worst,
    }


def parity(shapes: Shapes, device: Device, tiny: bool) -> dict:
    from grpo_dial.tools.device_env import smollm2_model

    model = smollm2_model(device, tiny)
    rows, width = (4, 24) if tiny else (8, 192)
    ids, mask = parity_batch(model.config.vocab_size, device, rows, width)
    out: dict = {"rows": rows, "width": width, "layers": model.config.num_hidden_layers}
    paths = ("lean_sdpa", "lean_matmul", "model")
    results = {}
    for precision in ("fp32", "bf16"):
        got = {p: _logits_and_grads(model, p, ids, mask, precision, device) for p in paths}
        results[precision] = got
        out[precision] = {
            "lean_sdpa_vs_model": _compare(got["lean_sdpa"], got["model"], mask),
            "lean_matmul_vs_model": _compare(got["lean_matmul"], got["model"], mask),
            "lean_sdpa_vs_lean_matmul": _compare(got["lean_sdpa"], got["lean_matmul"], mask),
        }
    real = (mask[:, 1:] * mask[:, :-1]).bool()
    for path in ("lean_sdpa", "model"):  # the GPU path's and the reference's bf16 rounding
        diff = (results["bf16"][path][1] - results["fp32"][path][1]).abs()[real]
        out[f"bf16_vs_fp32_{path}"] = {
            "logprob_mean_abs": float(diff.mean()),
            "logprob_max_abs": float(diff.max()),
            "grad_rel": _compare(results["bf16"][path], results["fp32"][path], mask)["grad_rel"],
        }
    del model, results
    device.free()
    return out

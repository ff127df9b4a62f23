"""The aware tail's dose-response on the transformer (the sweep: analysis/aware/dose.py):
sampling the base policy, the tail kernel by autograd, and training a sweep cell.

The base policy at step 0 (`base_responses`): responses of the base sampled as the trainer
samples them (the task's forced cores). `special_mass` is the softmax mass the sampler masks
(pad, bos, unk; policy/rollout/sample.py) at the tokens it drew. `tail_kernel`: the kernel K of
the modes' continue-logit gradients J at the base (analysis/aware/dose.py's docstring).
`train_cell`: every seed of one arm trained at one level with the trainer's own step; the
tail-frozen control at learning rate 0 (analysis/aware/dose.py's docstring).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from grpo_dial.policy.masks import weight_masks

# --------------------------------------------------------------------------- the base policy


def base_responses(
    model, tokenizer, task, problems, samples: int, max_new_tokens: int, temperature: float,
    generator, rng: np.random.Generator,
):  # fmt: skip
    """(rollouts, table): `samples` responses to each problem from the base policy, the task's
    forced cores drawn with `rng`, as a run's responses table at step 0 (first round)."""
    import torch

    from grpo_dial.policy.rollout import forced, generate_groups

    prefixes = forced.draw_prefixes(task, problems, samples, rng)
    with torch.no_grad():
        r = generate_groups(model, tokenizer, problems, samples, max_new_tokens, temperature,
                            generator, prefixes=prefixes)  # fmt: skip
    if prefixes and r.forced is not None:
        check_core_tokens(prefixes, r.forced.cpu().numpy())
    verdicts = [task.verify(p, t, f) for p, t, f in zip(r.problems, r.texts, r.finished.tolist(),
                                                         strict=True)]  # fmt: skip
    splits = [task.length_split(p, t) for p, t in zip(r.problems, r.texts, strict=True)]
    table = pd.DataFrame(
        {
            "step": 0, "group": r.group_ids.cpu().numpy(),
            "prompt_id": [p.prompt_id for p in r.problems],
            "difficulty": [p.difficulty for p in r.problems],
            "reward": [float(v.correct) for v in verdicts],
            "length": [len(t) for t in r.texts],
            "tokens": r.response_lengths.cpu().numpy(),
            "truncated": [bool(v.truncated) for v in verdicts],
            "work": [s.work for s in splits], "redundant": [s.redundant for s in splits],
            "resample_round": 0, "prefix": list(prefixes or [""] * len(r)),
        }
    )  # fmt: skip
    return r, table


def check_core_tokens(prefixes: Sequence[str], forced: np.ndarray) -> None:
    """Refuse forced cores not written one token per character (forced (N,): their token
    counts): the aware tables (analysis/aware/runs.step_table) count a core's tokens by its
    characters."""
    chars = np.array([len(p) for p in prefixes])  # (N,)
    if (bad := np.flatnonzero(np.asarray(forced) != chars)).size:
        i = int(bad[0])
        raise ValueError(
            f"the tokenizer writes the forced core {prefixes[i]!r} in {int(forced[i])} tokens, "
            "not one per character, which the aware tables assume; use a tokenizer that splits "
            "digits and the modes '=' and '~'"
        )


def _forward(model, r):
    """Logits (N, T, V) predicting each response token of rollouts r, with the gradient."""
    import torch

    ids = torch.cat([r.prompt_ids, r.response_ids], 1)  # (N, P + T)
    mask = torch.cat([r.prompt_mask, r.response_mask], 1)
    pos = (mask.cumsum(1) - 1).clamp(min=0)
    logits = model(input_ids=ids, attention_mask=mask, position_ids=pos).logits
    p = r.prompt_ids.shape[1]
    return logits[:, p - 1 : -1]  # (N, T, V): row t predicts response token t


BASE_ROUNDS = 4  # the base sample: every pool prompt's group of channel.samples, this many times
CHUNK = 64  # rows per forward of the base sample (the logits are rows x T x vocabulary)


def _chunks(r):
    """r's rows in consecutive chunks of at most CHUNK (Rollouts.select)."""
    import torch

    for start in range(0, len(r), CHUNK):
        yield r.select(torch.arange(start, min(start + CHUNK, len(r))))


def special_mass(model, tokenizer, r) -> float:
    """Mean over the responses' sampled tokens of the softmax mass on the ids the sampler
    masks (policy/rollout/sample.banned_ids): what its distribution differs from the policy's."""
    import torch

    from grpo_dial.policy.rollout.sample import banned_ids, eos_ids

    banned = banned_ids(tokenizer, eos_ids(model, tokenizer))
    if not banned:
        return 0.0
    total, count = 0.0, 0
    with torch.no_grad():
        for part in _chunks(r):
            probs = torch.softmax(_forward(model, part).float(), -1)[..., banned].sum(-1)
            mask = part.response_mask.bool()  # (n, T)
            total, count = total + float(probs[mask].double().sum()), count + int(mask.sum())
    return total / count if count else float("nan")


def _decisions(r) -> np.ndarray:
    """(N, T) bool: the positions where the policy decides to continue the tail or stop (after
    the forced core, up to and including the last generated token)."""
    t = np.arange(r.response_mask.shape[1])[None, :]  # (1, T)
    forced = np.zeros(len(r)) if r.forced is None else r.forced.cpu().numpy()
    return (t >= forced[:, None]) & r.response_mask.cpu().numpy().astype(bool)


def mode_gradients(model, tokenizer, r, rows: int = 512):
    """(J_~, J_=, counts): the gradients (float64, every trainable weight flattened in
    model.parameters() order) of each mode's mean continue logit log P(continue) - log P(EOS)
    over its decision positions, from the first `rows` responses of r (analysis/aware/dose.py);
    counts: mode name ("e", "c") -> positions. A mode without a position gives None."""
    import torch

    from grpo_dial.policy.rollout.sample import banned_ids, eos_ids

    r = r.select(torch.arange(min(rows, len(r))))
    eos = eos_ids(model, tokenizer)
    keep = [i for i in range(model.config.vocab_size)
            if i not in set(eos) | set(banned_ids(tokenizer, eos))]  # fmt: skip
    mode = np.array([(p or " ")[0] for p in r.prefixes])  # (N,)
    decide = _decisions(r)  # (N, T)
    params = [p for p in model.parameters() if p.requires_grad]
    grads, counts = {}, {}
    for name, m in (("e", "~"), ("c", "=")):
        sel = decide & (mode == m)[:, None]  # (N, T)
        counts[name] = int(sel.sum())
        if not counts[name]:
            grads[name] = None
            continue
        total = None  # the mean's gradient, summed chunk by chunk (bounded logits memory)
        for start, part in zip(range(0, len(r), CHUNK), _chunks(r), strict=True):
            part_sel = torch.tensor(sel[start : start + len(part)])  # (n, T)
            if not part_sel.any():
                continue
            logits = _forward(model, part).float()  # (n, T, V)
            cont = torch.logsumexp(logits[..., keep], -1) - torch.logsumexp(logits[..., eos], -1)
            g = torch.autograd.grad(cont[part_sel].sum() / counts[name], params)
            flat = torch.cat([x.reshape(-1) for x in g]).double()
            total = flat if total is None else total + flat
        grads[name] = total
    return grads["e"], grads["c"], counts


KERNEL = ("k_ee", "k_ec", "k_cc", "k_diff")


def kernel_entries(e, c) -> dict[str, float]:
    """K_ee = J~ . J~, K_ec = J~ . J=, K_cc = J= . J=, k_diff = |J~ - J=|^2 (two mode gradients)."""
    return {"k_ee": float(e @ e), "k_ec": float(e @ c), "k_cc": float(c @ c),
            "k_diff": float((e - c) @ (e - c))}  # fmt: skip


def tail_kernel(model, tokenizer, r, rows: int = 512, weights: Sequence[str] = ("all",)
                ) -> pd.DataFrame:  # fmt: skip
    """One row per entry of `weights` (SGD_WEIGHTS): K_ee, K_ec, K_cc, k_diff (aware_sweep's
    docstring) of the J of `mode_gradients(model, tokenizer, r, rows)` restricted to the
    weights that setting moves (`weight_masks`), each J's L1 norm (an Adam step that moves every
    weight by lr along sign(J) moves the tail logit by lr |J|_1) and the decision positions
    behind each mode's J."""
    import torch

    e, c, counts = mode_gradients(model, tokenizer, r, rows)
    out = []
    for w in weights:
        if e is None or c is None:
            out.append({"weights": w, **dict.fromkeys(KERNEL, np.nan)})
            continue
        mask = torch.cat([m.reshape(-1) for m in weight_masks(model, tokenizer, w)]).double()
        ew, cw = e * mask, c * mask
        out.append(
            {"weights": w, **kernel_entries(ew, cw), "l1_estimate": float(ew.abs().sum()),
             "l1_compute": float(cw.abs().sum()), "positions_estimate": counts["e"],
             "positions_compute": counts["c"]}
        )  # fmt: skip
    return pd.DataFrame(out)

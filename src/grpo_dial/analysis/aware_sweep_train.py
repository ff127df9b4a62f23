"""The aware tail's dose-response on the transformer (issue 35; the sweep:
analysis/aware_sweep.py): sampling the base policy, the tail kernel by autograd, and training a
sweep cell.

The base policy at step 0 (`base_responses`): responses of the base sampled as the trainer
samples them (the task's forced cores). `special_mass` is the softmax mass the sampler masks
(pad, bos, unk; policy/rollout/sample.py) at the tokens it drew. `tail_kernel`: the kernel K of
the modes' continue-logit gradients J at the base (analysis/aware_sweep's docstring). `train_cell`:
every seed of one arm trained at one level with the trainer's own step; the tail-frozen control at
learning rate 0 (aware_sweep's docstring).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from grpo_dial.analysis.aware import step_table

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


def _forward(model, r):
    """Logits (N, T, V) predicting each response token of rollouts r, with the gradient."""
    import torch

    ids = torch.cat([r.prompt_ids, r.response_ids], 1)  # (N, P + T)
    mask = torch.cat([r.prompt_mask, r.response_mask], 1)
    pos = (mask.cumsum(1) - 1).clamp(min=0)
    logits = model(input_ids=ids, attention_mask=mask, position_ids=pos).logits
    p = r.prompt_ids.shape[1]
    return logits[:, p - 1 : -1]  # (N, T, V): row t predicts response token t


def special_mass(model, tokenizer, r) -> float:
    """Mean over the responses' sampled tokens of the softmax mass on the ids the sampler
    masks (policy/rollout/sample.banned_ids): what its distribution differs from the policy's."""
    import torch

    from grpo_dial.policy.rollout.sample import banned_ids, eos_ids

    banned = banned_ids(tokenizer, eos_ids(model, tokenizer))
    if not banned:
        return 0.0
    with torch.no_grad():
        probs = torch.softmax(_forward(model, r).float(), -1)[..., banned].sum(-1)  # (N, T)
    return float(probs[r.response_mask.bool()].mean())


def _decisions(r) -> np.ndarray:
    """(N, T) bool: the positions where the policy decides to continue the tail or stop (after
    the forced core, up to and including the last generated token)."""
    t = np.arange(r.response_mask.shape[1])[None, :]  # (1, T)
    forced = np.zeros(len(r)) if r.forced is None else r.forced.cpu().numpy()
    return (t >= forced[:, None]) & r.response_mask.cpu().numpy().astype(bool)


def mode_gradients(model, tokenizer, r, rows: int = 512):
    """(J_~, J_=, counts): the gradients (float64, every trainable weight flattened in
    model.parameters() order) of each mode's mean continue logit log P(continue) - log P(EOS)
    over its decision positions, from the first `rows` responses of r (aware_sweep's docstring);
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
        sel = torch.tensor(decide & (mode == m)[:, None])  # (N, T)
        counts[name] = int(sel.sum())
        if not counts[name]:
            grads[name] = None
            continue
        logits = _forward(model, r).float()  # (N, T, V)
        cont = torch.logsumexp(logits[..., keep], -1) - torch.logsumexp(logits[..., eos], -1)
        g = torch.autograd.grad(cont[sel].mean(), params)
        grads[name] = torch.cat([x.reshape(-1) for x in g]).double()
    return grads["e"], grads["c"], counts


KERNEL = ("k_ee", "k_ec", "k_cc", "k_diff")
SGD_WEIGHTS = ("all", "markers")  # the weights a sweep run may move (`weight_masks`)


def kernel_entries(e, c) -> dict[str, float]:
    """K_ee = J~ . J~, K_ec = J~ . J=, K_cc = J= . J=, k_diff = |J~ - J=|^2 (two mode gradients)."""
    return {"k_ee": float(e @ e), "k_ec": float(e @ c), "k_cc": float(c @ c),
            "k_diff": float((e - c) @ (e - c))}  # fmt: skip


def weight_masks(model, tokenizer, weights: str) -> list:
    """Per trainable parameter (model.parameters() order), the 0/1 mask of the entries a sweep
    run moves. "all": every entry. "markers": only the rows of the mode markers "=" and "~"
    (data/tasks/aware.MODES) in the input embedding (with tied embeddings also their output rows).
    As inputs, "~" reaches only estimate-mode responses (no prompt holds one) and "=" mostly
    compute-mode ones (every prompt ends in "="); as outputs both rows score a token the trained
    tail hardly emits. So K_ec is a small share of K_ee and K_cc (on the sweep's base 0.012 against
    0.059 and 0.071; every weight: 61.9 against 62.1 and 61.8): one mode's tail moves without
    dragging the other's (analysis/aware_sweep's docstring)."""
    import torch

    from grpo_dial.data.tasks.aware import MODES

    params = [p for p in model.parameters() if p.requires_grad]
    if weights == "all":
        return [torch.ones_like(p) for p in params]
    if weights != "markers":
        raise ValueError(f"unknown sweep weights {weights!r}: one of {', '.join(SGD_WEIGHTS)}")
    ids = []
    for mode in MODES:
        got = tokenizer(mode, add_special_tokens=False)["input_ids"]
        if len(got) != 1:
            raise ValueError(
                f"sweep weights 'markers' need the mode marker {mode!r} to be one token; the "
                f"tokenizer makes {len(got)}: set aware_sweep.sgd_weights to 'all'"
            )
        ids += got
    embedding = model.get_input_embeddings().weight
    masks = [torch.zeros_like(p) for p in params]
    rows = [i for i, p in enumerate(params) if p is embedding]
    if not rows:
        raise ValueError("sweep weights 'markers': the input embedding is not trainable")
    masks[rows[0]][ids] = 1.0
    return masks


def restrict(model, masks) -> None:
    """Make a training step move only the masked entries: a parameter whose mask is all 0 stops
    requiring a gradient (the optimizer built after this never sees it); a partly masked one has
    its gradient multiplied by the mask as backward computes it (before clipping and the step).
    Weight decay would still shrink the masked-out entries: train_cell refuses it."""
    params = [p for p in model.parameters() if p.requires_grad]
    for p, m in zip(params, masks, strict=True):
        if not bool(m.any()):
            p.requires_grad_(False)
        elif not bool(m.all()):
            p.register_hook(lambda g, m=m: g * m)


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


# --------------------------------------------------------------------------- training


def cell_config(train: Mapping, arm, pool: int, pool_seed: int, seed: int, device: str = "cpu"):
    """The TrainConfig of one sweep run: the config's train keys without evaluation, identity
    probe or progress bar, the pool, the seed and the arm's allocation."""
    from dataclasses import replace

    from grpo_dial.train.config import TrainConfig

    config = TrainConfig(
        **{**train, "identity_every": 0, "eval_every": 0, "progress": False},
        train_pool=pool,
        pool_seed=pool_seed,
        seed=int(seed),
        device=device,
    )
    return replace(config, allocation=arm.allocation)


def train_cell(base_dir: str, task_spec: Mapping, arm, train: Mapping, seeds: Sequence[int],
               pool: int, pool_seed: int, device: str = "cpu", frozen: bool = False,
               weights: str = "all") -> pd.DataFrame:  # fmt: skip
    """Every seed of `arm` trained for train['steps'] steps from the base in this process, with
    the trainer's own step (train.loop.run_step; no evaluation, probe or checkpoint): the
    runs' step tables (analysis/aware.step_table) with the step's grad_norm and the seed.
    frozen: the tail-frozen control, every step taken at learning rate 0 (aware_sweep's
    docstring). weights: what the steps move (`weight_masks`: "all", or the mode markers'
    embedding rows alone)."""
    from grpo_dial.data.tasks import task_from_spec
    from grpo_dial.policy.model import load_policy
    from grpo_dial.train import loop
    from grpo_dial.train import records as rec

    if weights != "all" and float(train.get("weight_decay", 0.0)):
        raise ValueError(
            f"sweep weights {weights!r} with weight_decay {train['weight_decay']}: decay would "
            "move the weights the run holds still; set train.weight_decay to 0"
        )
    task = task_from_spec(task_spec)
    problems = task.problems("train", pool, pool_seed)
    heldout = task.problems("heldout", 1, pool_seed)
    out = []
    for seed in seeds:
        config = cell_config(train, arm, pool, pool_seed, int(seed), device)
        model, tokenizer = load_policy(base_dir, device=device, dtype="float32")
        if weights != "all":
            restrict(model, weight_masks(model, tokenizer, weights))
        run = loop.new_run(model, tokenizer, None, problems, heldout, arm.dial, config, None)
        if frozen:
            for group in run.optimizer.param_groups:
                group["lr"] = 0.0
        for step in range(1, config.steps + 1):
            loop.run_step(run, task, arm.dial, config, step)
        frames = rec.to_frames(run.records, loop.table_columns())
        steps = step_table(frames["responses"]).merge(
            frames["steps"][["step", "grad_norm"]], on="step", how="left"
        )
        out.append(steps.assign(seed=int(seed)))
    return pd.concat(out, ignore_index=True)

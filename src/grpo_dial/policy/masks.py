"""Which weights a training step may move: per-parameter 0/1 masks, and hooks that keep a step
to them (the aware sweep's SGD cells move only the mode markers' embedding rows)."""

from __future__ import annotations

SGD_WEIGHTS = ("all", "markers")  # the weights a sweep run may move (`weight_masks`)


def weight_masks(model, tokenizer, weights: str) -> list:
    """Per trainable parameter (model.parameters() order), the 0/1 mask of the entries a sweep
    run moves. "all": every entry. "markers": only the rows of the mode markers "=" and "~"
    (data/tasks/aware.MODES) in the input embedding (with tied embeddings also their output rows).
    As inputs, "~" reaches only estimate-mode responses (no prompt holds one) and "=" mostly
    compute-mode ones (every prompt ends in "="); as outputs both rows score a token the trained
    tail hardly emits. So K_ec is a small share of K_ee and K_cc, where on every weight the three
    are nearly equal: one mode's tail moves without dragging the other's (analysis/aware/dose.py's
    docstring)."""
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

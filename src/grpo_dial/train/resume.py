"""Resume a run from its checkpoint without ever losing one (train_run's start and saves).

Rules, in order, when `checkpoint_dir/last.pt` exists at the start of a run:
  1. temporary files of killed writes (`.last.pt.tmp-<pid>`) are removed and named in the log;
  2. a checkpoint whose resume key equals this run's is resumed; `train.steps` is not part of
     the key, so a run whose only change is more steps continues from its checkpoint (a
     checkpoint past the new `steps` counts as another run's);
  3. any other checkpoint (another config field, dial, prompt pool, base model or pass-rate
     prior; or an older checkpoint format) is never overwritten: with `train.resume: auto` it is
     moved aside to `superseded-<UTC time>.pt`, named in the log with every key that changed,
     and the run starts afresh; with `resume: strict` the run stops with one line naming them;
  4. a damaged checkpoint (unreadable, truncated, or failing its content checksum) is moved aside
     to `damaged-<UTC time>.pt` with a one-line warning naming it, and the run starts afresh
     (under either mode: nothing is deleted, and no later rerun trips over it again).
"""

from __future__ import annotations

import logging
from pathlib import Path

import torch

from grpo_dial.core.difficulty_anchor import AnchorState
from grpo_dial.train import checkpoint
from grpo_dial.train.state import RunState

log = logging.getLogger("grpo_dial")

_PARTS = {  # resume-key entries that are hashes: what a difference in them means
    "prompts": "the prompt pools (task, train_pool, heldout_prompts or pool_seed)",
    "base_model": "the base model's weights",
    "tracker_prior": "the pass-rate table behind the tracker's prior",
    "sampling_device": "the kind of device sampling runs on",
}
_MISSING = "<absent>"


def _short(v: object) -> str:
    text = repr(v)
    return text if len(text) <= 40 else text[:37] + "..."


def key_changes(old: dict, new: dict) -> list[str]:
    """What differs between a checkpoint's resume key and this run's, one phrase per key."""
    out = []
    for part in sorted(set(old) | set(new)):
        a, b = old.get(part, _MISSING), new.get(part, _MISSING)
        if a == b:
            continue
        if isinstance(a, dict) and isinstance(b, dict):
            prefix = "train" if part == "config" else part
            for name in sorted(set(a) | set(b)):
                was, now = a.get(name, _MISSING), b.get(name, _MISSING)
                if was != now:
                    out.append(f"{prefix}.{name}: {_short(was)} -> {_short(now)}")
        else:
            out.append(f"{_PARTS.get(part, part)} changed")
    return out


def open_checkpoint(path: Path, key: dict, steps: int, mode: str) -> dict | None:
    """The checkpoint state to resume, or None to start afresh (rules 1-3 of the module)."""
    if path.parent.is_dir():
        for tmp in checkpoint.clean_orphans(path.parent):
            log.info("removed %s, left by a checkpoint write that was killed", tmp)
    try:
        state = checkpoint.load_checkpoint(path)
    except checkpoint.StaleCheckpoint as err:
        return _not_ours(path, str(err).removeprefix(f"checkpoint {path} "), mode)
    except checkpoint.DamagedCheckpoint as err:
        aside = checkpoint.move_aside(path, "damaged")
        log.warning("%s; moved to %s, starting afresh", err, aside)
        return None
    if state is None:
        return None
    changes = key_changes(state["key"], key)
    if state["step"] > steps:
        changes.append(f"train.steps: {state['step']} already done, {steps} asked")
    if not changes:
        return state
    return _not_ours(path, "belongs to another run (" + "; ".join(changes) + ")", mode)


def _not_ours(path: Path, why: str, mode: str) -> None:
    if mode == "strict":
        raise ValueError(
            f"checkpoint {path} {why}; to keep it aside and start afresh rerun with "
            "--config 'train={resume: auto}', to go back use the settings it was written with"
        )
    aside = checkpoint.move_aside(path)
    log.warning("checkpoint %s %s; kept as %s, starting afresh", path, why, aside)
    return None


def restore(run: RunState, state: dict, device: str) -> int:
    """Load a resumable checkpoint's state into `run`; the step it ended."""
    run.model.load_state_dict(state["model"])
    run.optimizer.load_state_dict(state["optimizer"])
    checkpoint.restore_rng(state["rng"], run.rng, run.generator, device)
    run.records, run.nonfinite = state["records"], state["nonfinite_steps"]
    run.tracker = tuple(t.numpy() for t in state["tracker"])
    estimator_state = state.get("estimator", {})
    if run.lam is not None and "lambda" in estimator_state:
        with torch.no_grad():
            run.lam.copy_(estimator_state["lambda"])
    if "anchor" in estimator_state:
        value, *history = estimator_state["anchor"].tolist()
        run.anchor = AnchorState(value, tuple(history))
    run.saved_step = state["step"]
    return state["step"]


def save(run: RunState, path: Path, step: int, device: str) -> None:
    """Write the run's state at the end of `step`; refuses non-finite weights or optimizer state
    (one line; the last good checkpoint stays)."""
    tensors = [*run.model.parameters()]
    tensors += [v for s in run.optimizer.state.values() for v in s.values() if torch.is_tensor(v)]
    if not checkpoint.all_finite(tensors):
        raise ValueError(
            f"step {step}: non-finite weights or optimizer state; not checkpointed, "
            f"{last_good(run, path)}"
        )
    checkpoint.save_checkpoint(
        path,
        {
            "key": run.key,
            "step": step,
            "nonfinite_steps": run.nonfinite,
            "records": run.records,
            "model": run.model.state_dict(),
            "optimizer": run.optimizer.state_dict(),
            "rng": checkpoint.capture_rng(run.rng, run.generator, device),
            "tracker": [torch.from_numpy(t) for t in run.tracker],
            "estimator": _estimator_state(run),
        },
    )
    run.saved_step = step


def _estimator_state(run: RunState) -> dict:
    """lambda-GRPO's lambda and HA-DW's anchor (value, then its accuracy history) as tensors."""
    out = {"anchor": torch.tensor([run.anchor.value, *run.anchor.history], dtype=torch.float64)}
    if run.lam is not None:
        out["lambda"] = run.lam.detach().clone()
    return out


def last_good(run: RunState, path: Path) -> str:
    """Where the run can continue from, as a phrase for error messages."""
    if run.saved_step is None:
        return "no checkpoint was written yet"
    return f"last good checkpoint {path} (step {run.saved_step}) kept"

"""TRL's completions files are snapshots of one sliding window: new rows, repeats, eval rows.

What TRL (1.13-1.16, `GRPOTrainer`) writes: every `log()` call (training, every `logging_steps`
steps, and evaluation) writes `completions/completions_<global_step>.parquet` from `self._logs`,
deques of the last `generation_batch_size` rows that are never cleared (grpo_trainer.py, 1.16:
the deques at lines 1088-1095, extended in `_generate_and_score_completions` at 2833-2845,
written in `log` at 3302-3357). Hence:
- generation happens every `steps_per_generation * num_iterations` steps (`_prepare_inputs`,
  1536-1546); logging more often writes the same rows again under later step labels;
- an evaluation appends its rows to the same deques and its `log()` writes the same file name
  as the training log of that step (transformers `_maybe_log_save_evaluate`: log, then evaluate),
  overwriting it; the file holds the window's tail followed by the eval rows.

So file b is the tail of file a (its predecessor) followed by b's new rows: the overlap o is the
largest with b[:o] == a[-o:] (rows compared on every column but step). Rows 0..o-1 are repeats.
A file is an evaluation file when its step is logged as evaluated (trainer_state.json's
log_history, or `eval_steps`: every multiple and the last step, as transformers'
DefaultFlowCallback), when its step is 0 (eval_on_start), or when it overlaps its predecessor
partly (0 < o < len(b): a training generation replaces the whole window). Its new rows are eval
rows, except that when E, the eval rows per evaluation (len(b) - o of a partly overlapping
evaluation file), is known and smaller than the file, its first len(b) - E new rows are the tail
of that step's training batch (the rest of that batch was overwritten and is lost).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from grpo_dial.external.log_files import unreadable


@dataclass
class Snapshots:
    """The new rows of each file, labelled: kept = training, plus what was set apart."""

    rows: pd.DataFrame  # the new training rows, file order
    repeated: int = 0
    eval_rows: int = 0
    eval_steps: list[int] = field(default_factory=list)
    lost_train_rows: int = 0
    eval_source: str = "none"
    first_repeat: str = ""
    first_eval: str = ""


def _canonical(value: object) -> str:
    if isinstance(value, np.ndarray):
        value = value.tolist()
    return json.dumps(
        value, sort_keys=True, default=lambda v: v.tolist() if hasattr(v, "tolist") else str(v)
    )


def _structured(column: pd.Series) -> bool:
    """An object column holding anything but strings (messages, lists): hashed via JSON."""
    return column.dtype == object and not column.map(lambda v: isinstance(v, str)).all()


def row_keys(df: pd.DataFrame) -> np.ndarray:
    """(N,) uint64 hash of each row over every column but step and _loc, in sorted order."""
    cols = sorted(c for c in df.columns if c not in ("step", "_loc"))
    frame = pd.DataFrame({c: df[c].map(_canonical) if _structured(df[c]) else df[c] for c in cols})
    if not cols:
        return np.zeros(len(df), np.uint64)
    return pd.util.hash_pandas_object(frame, index=False).to_numpy()


def overlap(a: np.ndarray, b: np.ndarray) -> int:
    """Largest o with b[:o] == a[-o:] (0 if none)."""
    n = min(len(a), len(b))
    if n == 0:
        return 0
    tail = a[len(a) - n :]
    for j in np.flatnonzero(tail == b[0]):  # ascending j = longest overlap first
        o = n - j
        if np.array_equal(b[:o], tail[j:]):
            return int(o)
    return 0


def logged_eval_steps(root: Path) -> set[int] | None:
    """Steps with an evaluation entry (a key eval_*) in the newest trainer_state.json under the
    output dir (itself or checkpoint-*/); None when there is none."""
    states = [root / "trainer_state.json", *sorted(root.glob("checkpoint-*/trainer_state.json"))]
    best: tuple[int, list] | None = None
    for path in (p for p in states if p.is_file()):
        try:
            state = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
            raise unreadable(path, err) from None
        if not isinstance(state, dict) or not isinstance(state.get("log_history"), list):
            raise ValueError(f"{path} is not a trainer state (no log_history list)")
        step = state.get("global_step")
        step = step if isinstance(step, int) else 0
        if best is None or step > best[0]:
            best = (step, state["log_history"])
    if best is None:
        return None
    steps = [
        entry["step"]
        for entry in best[1]
        if isinstance(entry, dict) and "step" in entry and any(k.startswith("eval_") for k in entry)
    ]
    if not all(isinstance(s, int) and not isinstance(s, bool) for s in steps):
        raise ValueError(f"{root}: a trainer_state.json log_history step is not an integer")
    return set(steps)


def every_eval_steps(eval_steps: int | Iterable[int], steps: Iterable[int]) -> set[int]:
    """The evaluated steps: a list as given; an int N = its multiples and the last step."""
    steps = sorted(set(steps))
    if isinstance(eval_steps, int | np.integer):
        if eval_steps < 1:
            raise ValueError(f"eval_steps must be a positive integer, got {eval_steps}")
        return {s for s in steps if s % eval_steps == 0} | set(steps[-1:])
    try:
        return {int(s) for s in eval_steps}
    except (TypeError, ValueError):
        raise ValueError(
            f"eval_steps must be an integer or a list of steps: {eval_steps!r}"
        ) from None


def split_snapshots(
    frames: list[tuple[int, pd.DataFrame]], evaluated: set[int] | None, source: str
) -> Snapshots:
    """frames: (step, rows) per file in step order. Keep each file's new training rows."""
    keys = [row_keys(df) for _, df in frames]
    overlaps = [0] + [overlap(a, b) for a, b in zip(keys, keys[1:], strict=False)]
    partial = [0 < o < len(k) for o, k in zip(overlaps, keys, strict=True)]
    evaluated = set(evaluated or ())
    inferred = {step for (step, _), p in zip(frames, partial, strict=True) if p or step == 0}
    eval_steps = evaluated | inferred
    sizes = [len(k) - o for o, k, p in zip(overlaps, keys, partial, strict=True) if p]
    per_eval = int(np.median(sizes)) if sizes else None  # E, eval rows per evaluation
    out = Snapshots(rows=pd.DataFrame(), eval_steps=sorted(eval_steps & {s for s, _ in frames}))
    out.eval_source = source if evaluated else ("inferred" if inferred else "none")
    if evaluated and inferred - evaluated:
        out.eval_source = f"{source} + inferred"
    kept = []
    for (step, df), o in zip(frames, overlaps, strict=True):
        n_train = len(df) - o  # new rows
        if step in eval_steps:
            n_train = len(df) - per_eval if (o == 0 and per_eval and per_eval < len(df)) else 0
            if o == 0 and n_train:
                out.lost_train_rows += per_eval
            n_eval = len(df) - o - n_train
            if n_eval and not out.first_eval:
                out.first_eval = str(df["_loc"].iloc[o + n_train])
            out.eval_rows += n_eval
        if o and not out.first_repeat:
            out.first_repeat = str(df["_loc"].iloc[0])
        out.repeated += o
        kept.append(df.iloc[o : o + n_train])
    out.rows = pd.concat(kept, ignore_index=True) if kept else pd.DataFrame()
    return out

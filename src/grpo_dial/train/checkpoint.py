"""Checkpoints of an RL run: one file, written atomically, loadable with weights_only=True.

`checkpoint_dir/last.pt` holds the model state_dict, the optimizer state, every RNG the run
draws from (Python `random`, the numpy Generator of prompt order, torch's CPU RNG, the sampling
torch.Generator, CUDA's when present), the step, the count of skipped non-finite steps, the
records so far and a resume key (config fields, dial, pool and base-model fingerprints). All of
it is tensors and plain containers (dict, list, tuple, str, int, float, bool, None), so
`torch.load(..., weights_only=True)` reads it without unpickling arbitrary objects.

Writing goes to a temporary file in the same directory, flushed and fsync'ed, then `os.replace`d
over `last.pt`: a run killed mid-write leaves the previous checkpoint intact. Checkpoints live
outside the workflow's declared outputs so Snakemake never deletes them when a job fails; after a
run completes `last.pt` is kept (at the final step), so re-running the rule only rewrites the
tables; delete the checkpoint folder to reclaim the space or to force a fresh run.
"""

from __future__ import annotations

import os
import random
from pathlib import Path

import numpy as np
import torch

FORMAT = 1
FILENAME = "last.pt"


def capture_rng(rng: np.random.Generator, generator: torch.Generator) -> dict:
    """Every RNG state of a run as plain containers and tensors."""
    state = {
        "python": random.getstate(),
        "numpy": rng.bit_generator.state,
        "torch_cpu": torch.get_rng_state(),
        "sampling": generator.get_state(),
        "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else [],
    }
    return state


def restore_rng(state: dict, rng: np.random.Generator, generator: torch.Generator) -> None:
    """Put back what `capture_rng` took (numpy and sampling generators in place)."""
    random.setstate(_tuples(state["python"]))
    rng.bit_generator.state = state["numpy"]
    torch.set_rng_state(state["torch_cpu"])
    generator.set_state(state["sampling"])
    if state["cuda"] and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def _tuples(x: object) -> object:
    # random.setstate wants (version, tuple_of_ints, gauss_next) with real tuples.
    return tuple(_tuples(v) for v in x) if isinstance(x, list | tuple) else x


def save_checkpoint(path: str | Path, payload: dict) -> None:
    """Atomically write `payload` (plus the format version) to `path`."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        with open(tmp, "wb") as f:
            torch.save({"format": FORMAT, **payload}, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def load_checkpoint(path: str | Path) -> dict | None:
    """The payload at `path` (tensors on the CPU), or None when there is no file."""
    path = Path(path)
    if not path.exists():
        return None
    try:
        payload = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as err:  # a torn or foreign file: say which, do not guess
        raise ValueError(f"cannot read checkpoint {path}: {err}") from err
    if not isinstance(payload, dict) or payload.get("format") != FORMAT:
        raise ValueError(f"{path} is not a grpo-dial checkpoint (format {FORMAT})")
    return payload


def model_fingerprint(model: torch.nn.Module) -> list[float]:
    """Per-parameter float64 sums: tells a different base model from the one a run started on."""
    with torch.no_grad():
        return [float(p.double().sum()) for p in model.parameters()]

"""Checkpoints of an RL run: one file, written atomically, loadable with weights_only=True.

`checkpoint_dir/last.pt` holds the model state_dict, the optimizer state, every RNG the run
draws from (Python `random`, the numpy Generator of prompt order, torch's CPU RNG, the sampling
torch.Generator, and the CUDA RNG of the policy's own device only, when it is a CUDA device), the
step, the count of consecutive non-finite steps, the records so far and a resume key (config
fields, dial, prompts and a hash of the base model's parameter bytes). All of it is tensors and
plain containers (dict, list, tuple, str, int, float, bool, None), so
`torch.load(..., weights_only=True)` reads it without unpickling arbitrary objects.

Hardware independence: the base-model fingerprint is a sha256 of each parameter's name, dtype,
shape and raw bytes (copied to the CPU), so it does not depend on a device's reduction order;
only the current device's CUDA RNG is saved (sampling uses its own torch.Generator, not the
global CUDA RNG), so a resume with fewer visible GPUs never indexes a device that is gone.

Writing goes to `.last.pt.tmp-<pid>` in the same directory, flushed and fsync'ed, then
`os.replace`d over `last.pt`: a run killed mid-write leaves the previous checkpoint intact, and the
next start removes the orphaned temporary file (`clean_orphans`). A checkpoint that belongs to
another run is never overwritten: it is moved aside (`move_aside`) or the run stops
(grpo_dial.train.resume).

Content checksum: `save_checkpoint` stores a sha256 of the payload's content (every tensor's
path, dtype, shape and bytes, every other value's repr) under "sha256", and `load_checkpoint`
recomputes it: a file damaged in place (a zeroed block, same size) that torch.load still reads
is refused as a DamagedCheckpoint, as is one torch.load cannot read (truncated). Checkpoints
written before the checksum have none and load as before.

Checkpoints live outside the workflow's declared outputs so Snakemake never deletes them when a
job fails; after a run completes `last.pt` is kept (at the final step).
"""

from __future__ import annotations

import hashlib
import logging
import os
import random
import signal
import time
from pathlib import Path

import numpy as np
import torch

FORMAT = 2  # 1: float-sum fingerprints and every device's CUDA RNG (not resumable any more)
FILENAME = "last.pt"
FAULT_ENV = "GRPO_DIAL_KILL_AT"  # "<point>:<step>": SIGKILL this process there (fault tests)

log = logging.getLogger("grpo_dial")


class StaleCheckpoint(ValueError):
    """A grpo-dial checkpoint of an older format, which this version cannot resume."""


class DamagedCheckpoint(ValueError):
    """A checkpoint file that cannot be read, or whose content fails its checksum."""


def content_digest(payload: dict) -> str:
    """sha256 over the payload's content in a fixed order: each tensor's path, dtype, shape and
    raw bytes, each other value's path and repr; the "sha256" entry itself left out."""
    digest = hashlib.sha256()

    def walk(node: object, path: str) -> None:
        if isinstance(node, torch.Tensor):
            t = node.detach().to("cpu").contiguous()
            digest.update(f"{path}|{t.dtype}|{tuple(t.shape)}\n".encode())
            digest.update(t.reshape(-1).view(torch.uint8).numpy().tobytes())
        elif isinstance(node, dict):
            for key in sorted(node, key=repr):
                if not (path == "" and key == "sha256"):
                    walk(node[key], f"{path}/{key!r}")
        elif isinstance(node, list | tuple):
            digest.update(f"{path}|{type(node).__name__}|{len(node)}\n".encode())
            for i, item in enumerate(node):
                walk(item, f"{path}/{i}")
        else:
            digest.update(f"{path}={node!r}\n".encode())

    walk(payload, "")
    return digest.hexdigest()


def fault_point(point: str, step: int) -> None:
    """SIGKILL the current process when FAULT_ENV names this point and step (kill tests only).

    Points: "step" (after the step's update, before its evaluation and checkpoint) and
    "checkpoint" (inside the checkpoint write, after the temporary file is written, before it
    replaces last.pt)."""
    if os.environ.get(FAULT_ENV) == f"{point}:{step}":
        os.kill(os.getpid(), signal.SIGKILL)


def _cuda_index(device: str | torch.device | None) -> int | None:
    """The CUDA device index of `device`, None for CPU devices or when CUDA is absent."""
    if device is None or not torch.cuda.is_available():
        return None
    device = torch.device(device)
    if device.type != "cuda":
        return None
    return torch.cuda.current_device() if device.index is None else device.index


def capture_rng(
    rng: np.random.Generator, generator: torch.Generator, device: str | None = None
) -> dict:
    """Every RNG state of a run as plain containers and tensors; CUDA's only for `device`."""
    index = _cuda_index(device)
    return {
        "python": random.getstate(),
        "numpy": rng.bit_generator.state,
        "torch_cpu": torch.get_rng_state(),
        "sampling": generator.get_state(),
        "cuda": None if index is None else torch.cuda.get_rng_state(index),
    }


def restore_rng(
    state: dict, rng: np.random.Generator, generator: torch.Generator, device: str | None = None
) -> None:
    """Put back what `capture_rng` took (numpy and sampling generators in place); the CUDA state
    goes to the run's current device, and is skipped when there is none."""
    random.setstate(_tuples(state["python"]))
    rng.bit_generator.state = state["numpy"]
    torch.set_rng_state(state["torch_cpu"])
    generator.set_state(state["sampling"])
    index = _cuda_index(device)
    if isinstance(state.get("cuda"), torch.Tensor) and index is not None:
        torch.cuda.set_rng_state(state["cuda"], index)


def _tuples(x: object) -> object:
    # random.setstate wants (version, tuple_of_ints, gauss_next) with real tuples.
    return tuple(_tuples(v) for v in x) if isinstance(x, list | tuple) else x


def save_checkpoint(path: str | Path, payload: dict) -> None:
    """Atomically write `payload` (plus the format version) to `path`."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        body = {"format": FORMAT, **payload}
        body["sha256"] = content_digest(body)
        with open(tmp, "wb") as f:
            torch.save(body, f)
            f.flush()
            fault_point("checkpoint", int(payload.get("step", -1)))
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def load_checkpoint(path: str | Path) -> dict | None:
    """The payload at `path` (tensors on the CPU), or None when there is no file.

    StaleCheckpoint for an older grpo-dial format; DamagedCheckpoint for a file torch.load
    cannot read or whose content fails its checksum; ValueError for a foreign file."""
    path = Path(path)
    if not path.exists():
        return None
    try:
        payload = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as err:  # a torn or damaged file: say which, do not guess
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise DamagedCheckpoint(f"cannot read checkpoint {path}: {first}") from err
    version = payload.get("format") if isinstance(payload, dict) else None
    if isinstance(version, int) and not isinstance(version, bool) and 0 < version < FORMAT:
        raise StaleCheckpoint(
            f"checkpoint {path} has format {version}, from before device-independent resume "
            f"keys (format {FORMAT}); it cannot be resumed"
        )
    if version != FORMAT:
        raise ValueError(f"{path} is not a grpo-dial checkpoint (format {FORMAT})")
    stored = payload.get("sha256")
    if stored is not None and stored != content_digest(payload):
        raise DamagedCheckpoint(
            f"checkpoint {path} fails its content checksum (changed after it was written)"
        )
    return payload


def clean_orphans(directory: str | Path) -> list[Path]:
    """Remove temporary files of killed writes (`.*.tmp-<pid>` whose process is gone or is
    this one); the paths removed."""
    removed = []
    for tmp in sorted(Path(directory).glob(".*.tmp-*")):
        pid = tmp.name.rpartition(".tmp-")[2]
        if pid.isdigit() and int(pid) != os.getpid() and _alive(int(pid)):
            continue
        tmp.unlink(missing_ok=True)
        removed.append(tmp)
    return removed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's live process
        return True
    return True


def move_aside(path: str | Path, prefix: str = "superseded") -> Path:
    """Rename `path` to `<prefix>-<UTC time>[-n].pt` beside it (never over another file)."""
    path = Path(path)
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    target, n = path.with_name(f"{prefix}-{stamp}.pt"), 1
    while target.exists():
        target, n = path.with_name(f"{prefix}-{stamp}-{n}.pt"), n + 1
    os.replace(path, target)
    return target


def model_fingerprint(model: torch.nn.Module) -> str:
    """sha256 of every parameter's name, dtype, shape and bytes (on the CPU): the same for the
    same weights on any device, whatever its reduction order."""
    digest = hashlib.sha256()
    with torch.no_grad():
        for name, p in model.named_parameters():
            t = p.detach().to("cpu").contiguous()
            digest.update(f"{name}|{t.dtype}|{tuple(t.shape)}\n".encode())
            digest.update(t.reshape(-1).view(torch.uint8).numpy().tobytes())
    return digest.hexdigest()


def all_finite(tensors) -> bool:
    """True when every floating tensor of `tensors` holds only finite values."""
    with torch.no_grad():
        return all(
            bool(torch.isfinite(t).all()) for t in tensors if torch.is_floating_point(t)
        )

"""One GPU per job: a bare "cuda" device resolved at run time to a GPU no other job holds.

Snakemake's local executor limits how many GPU jobs run at once (`resources: gpu=N`) but does not
say which device each job gets. Every policy job therefore claims one: it takes an exclusive,
non-blocking `flock` on `<lock_dir>/gpu-<id>.lock` for each visible device in turn and keeps the
first it gets until the process ends (the kernel drops the lock when the process exits, crashed or
not, so a lock is never stale). `<id>` is the device's entry in CUDA_VISIBLE_DEVICES (its index or
UUID) when that is set, else its index, so jobs that see different device sets never collide by
mistake. With one visible device (a SLURM job, or CUDA_VISIBLE_DEVICES set by hand) there is
nothing to choose and no lock is taken. An explicit "cuda:1" or "cpu" is used as given.

The lock directory is GRPO_DIAL_GPU_LOCK_DIR, else `<tmp>/grpo-dial-gpu-locks`: node-local,
shared by every job on the machine.
"""

from __future__ import annotations

import fcntl
import logging
import os
import tempfile
import time
from pathlib import Path

log = logging.getLogger("grpo_dial")

LOCK_DIR_ENV = "GRPO_DIAL_GPU_LOCK_DIR"
_HELD: dict[str, int] = {}  # lock path -> open file descriptor, held for the process lifetime


def default_lock_dir() -> Path:
    return Path(os.environ.get(LOCK_DIR_ENV) or Path(tempfile.gettempdir()) / "grpo-dial-gpu-locks")


def device_ids(n_devices: int, visible: str | None) -> list[str]:
    """Lock names of the n visible devices: CUDA_VISIBLE_DEVICES entries, else 0..n-1."""
    entries = [e.strip() for e in (visible or "").split(",") if e.strip()]
    if len(entries) >= n_devices:
        return entries[:n_devices]
    return [str(i) for i in range(n_devices)]


def _try_lock(path: Path) -> int | None:
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return None
    os.ftruncate(fd, 0)
    os.write(fd, f"{os.getpid()}\n".encode())
    return fd


def claim_index(
    ids: list[str],
    lock_dir: str | Path,
    timeout: float | None = None,
    poll: float = 1.0,
) -> int:
    """Index into `ids` of the first device whose lock this process could take (held until
    exit or `release`). Waits, polling every `poll` s, while all are held; after `timeout` s
    (None: forever) a ValueError says so."""
    if not ids:
        raise ValueError("no device to claim: the list of visible devices is empty")
    lock_dir = Path(lock_dir)
    lock_dir.mkdir(parents=True, exist_ok=True)
    lock_dir = lock_dir.resolve()
    deadline = None if timeout is None else time.monotonic() + timeout
    waited = False
    while True:
        for index, ident in enumerate(ids):
            path = lock_dir / f"gpu-{ident}.lock"
            if str(path) in _HELD:
                return index  # this process already holds it
            fd = _try_lock(path)
            if fd is not None:
                _HELD[str(path)] = fd
                return index
        if deadline is not None and time.monotonic() >= deadline:
            raise ValueError(
                f"all {len(ids)} GPUs are claimed by other jobs (locks in {lock_dir}); "
                "run fewer GPU jobs at once (resources: gpu=N)"
            )
        if not waited:
            log.info("all %d GPUs busy; waiting for one to be released", len(ids))
            waited = True
        time.sleep(poll)


def release(lock_dir: str | Path | None = None) -> None:
    """Drop the claims this process holds (all, or those under `lock_dir`)."""
    for path in list(_HELD):
        if lock_dir is None or Path(path).parent == Path(lock_dir).resolve():
            os.close(_HELD.pop(path))


def resolve_device(device: str, lock_dir: str | Path | None = None) -> str:
    """Resolve "cuda" to "cuda:<i>" of a GPU claimed for this process; others unchanged.

    A bare "cuda" with no GPU visible is a ValueError; with one visible GPU it is "cuda:0".
    The claimed device also becomes torch's current device, so code that says "cuda" lands on it.
    """
    if device != "cuda":
        return device
    import torch

    if not torch.cuda.is_available():
        raise ValueError("device 'cuda' was asked for but no CUDA GPU is visible; use device: cpu")
    n = torch.cuda.device_count()
    index = 0
    if n > 1:
        ids = device_ids(n, os.environ.get("CUDA_VISIBLE_DEVICES"))
        index = claim_index(ids, lock_dir or default_lock_dir())
        log.info("claimed GPU cuda:%d (%s) of %d", index, ids[index], n)
    torch.cuda.set_device(index)
    return f"cuda:{index}"

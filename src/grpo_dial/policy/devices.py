"""One GPU per job: a bare "cuda" device resolved at run time to a GPU no other job holds.

Snakemake's local executor limits how many GPU jobs run at once (`resources: gpu=N`, which the
workflow sets to `visible_gpu_count()` unless given) but does not say which device each job
gets. Every policy job therefore claims one: it takes an exclusive, non-blocking `flock` on
`<lock_dir>/gpu-<id>.lock` for each visible device in turn and keeps the first it gets until
the process ends (the kernel drops the lock when the process exits, crashed or not, so a lock
is never stale). `<id>` is the device's UUID (`GPU-...`, from torch), else its entry in
CUDA_VISIBLE_DEVICES, else its index, so jobs that see different device sets never collide by
mistake; with one visible device and no UUID there is nothing to choose and no lock is taken.
An explicit "cuda:1" or "cpu" is used as given.

Safety: the lock directory is GRPO_DIAL_GPU_LOCK_DIR, else `<tmp>/grpo-dial-gpu-locks-<uid>`,
created 0700 and refused unless it is a real directory owned by this user and writable by no
one else; lock files are opened with O_NOFOLLOW (a symlink is refused, never followed),
created 0600, never truncated (the holder's pid is written in place, fixed width).
A GPU whose lock is held is reported with the holder's pid; a claimed GPU that other programs
already use (memory in use before this job allocated any) is reported as a warning.
"""

from __future__ import annotations

import errno
import fcntl
import logging
import os
import shutil
import stat
import subprocess
import tempfile
import time
from pathlib import Path

log = logging.getLogger("grpo_dial")

LOCK_DIR_ENV = "GRPO_DIAL_GPU_LOCK_DIR"
BUSY_BYTES = 1 << 30  # memory other programs hold on a GPU before it counts as busy
_HELD: dict[str, int] = {}  # lock path -> open file descriptor, held for the process lifetime


def default_lock_dir() -> Path:
    """GRPO_DIAL_GPU_LOCK_DIR, else `<tmp>/grpo-dial-gpu-locks-<uid>` (one per user)."""
    own = Path(tempfile.gettempdir()) / f"grpo-dial-gpu-locks-{os.getuid()}"
    return Path(os.environ.get(LOCK_DIR_ENV) or own)


def visible_gpu_count(visible: str | None = None, smi: str | None = "nvidia-smi") -> int:
    """GPUs a job would see, without importing torch: the CUDA_VISIBLE_DEVICES entries up to
    the first invalid one (as CUDA reads it; "" means none) when set, else the `GPU ` lines of
    `nvidia-smi -L`; 0 without either. visible: the variable's value (None: the environment)."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES") if visible is None else visible
    if visible is not None:
        count = 0
        for entry in visible.split(","):
            entry = entry.strip()
            if not entry or entry.startswith("-"):
                break
            count += 1
        return count
    if smi is None or shutil.which(smi) is None:
        return 0
    try:
        out = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return 0
    return sum(line.startswith("GPU ") for line in out.stdout.splitlines())


def device_ids(n_devices: int, visible: str | None) -> list[str]:
    """Lock names of the n visible devices: CUDA_VISIBLE_DEVICES entries, else 0..n-1."""
    entries = [e.strip() for e in (visible or "").split(",") if e.strip()]
    if len(entries) >= n_devices:
        return entries[:n_devices]
    return [str(i) for i in range(n_devices)]


def private_dir(path: str | Path) -> Path:
    """`path` created 0700 if missing; a ValueError unless it is a real directory (not a
    symlink) owned by this user and not writable by group or others."""
    path = Path(path)
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    st = os.lstat(path)
    if stat.S_ISLNK(st.st_mode) or not stat.S_ISDIR(st.st_mode):
        raise ValueError(f"GPU lock directory {path} is not a plain directory; set {LOCK_DIR_ENV}")
    if st.st_uid != os.getuid():
        raise ValueError(
            f"GPU lock directory {path} belongs to another user (uid {st.st_uid}); "
            f"set {LOCK_DIR_ENV} to a directory of your own"
        )
    if st.st_mode & 0o022:
        raise ValueError(
            f"GPU lock directory {path} is writable by others (mode {st.st_mode & 0o777:o}); "
            f"chmod 700 it or set {LOCK_DIR_ENV}"
        )
    return path


def _open_lock(path: Path) -> int:
    """A descriptor of the lock file, created 0600; never through a symlink."""
    flags = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        fd = os.open(path, flags, 0o600)
    except OSError as error:
        if error.errno == errno.ELOOP:
            raise ValueError(f"GPU lock file {path} is a symlink; refusing to follow it") from None
        raise ValueError(f"cannot open GPU lock file {path}: {error.strerror}") from None
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode) or st.st_uid != os.getuid():
        os.close(fd)
        raise ValueError(f"GPU lock file {path} is not a regular file of this user; remove it")
    return fd


def _try_lock(path: Path) -> int | None:
    fd = _open_lock(path)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return None
    os.pwrite(fd, f"{os.getpid():>12}\n".encode(), 0)  # fixed width: nothing to truncate
    return fd


def holder(path: Path) -> str:
    """The pid written in a lock file, or '?'."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return "?"
    try:
        return os.read(fd, 64).decode(errors="replace").strip() or "?"
    finally:
        os.close(fd)


def claim_index(
    ids: list[str],
    lock_dir: str | Path,
    timeout: float | None = None,
    poll: float = 1.0,
) -> int:
    """Index into `ids` of the first device whose lock this process could take (held until
    exit or `release`). Waits, polling every `poll` s, while all are held, and says which
    process holds each; after `timeout` s (None: forever) a ValueError says so."""
    if not ids:
        raise ValueError("no device to claim: the list of visible devices is empty")
    lock_dir = private_dir(lock_dir).resolve()
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
        held = ", ".join(f"{i} by pid {holder(lock_dir / f'gpu-{i}.lock')}" for i in ids)
        if deadline is not None and time.monotonic() >= deadline:
            raise ValueError(
                f"all {len(ids)} GPUs are claimed by other jobs ({held}; locks in {lock_dir}); "
                "run fewer GPU jobs at once (resources: gpu=N)"
            )
        if not waited:
            log.info("all %d GPUs busy (%s); waiting for one to be released", len(ids), held)
            waited = True
        time.sleep(poll)


def release(lock_dir: str | Path | None = None) -> None:
    """Drop the claims this process holds (all, or those under `lock_dir`)."""
    for path in list(_HELD):
        if lock_dir is None or Path(path).parent == Path(lock_dir).resolve():
            os.close(_HELD.pop(path))


def gpu_uuids(n: int) -> list[str] | None:
    """`GPU-<uuid>` of the n visible devices (as nvidia-smi names them), or None when torch
    cannot tell."""
    import torch

    try:
        return [f"GPU-{torch.cuda.get_device_properties(i).uuid}" for i in range(n)]
    except (AttributeError, RuntimeError):
        return None


def resolve_device(device: str, lock_dir: str | Path | None = None) -> str:
    """Resolve "cuda" to "cuda:<i>" of a GPU claimed for this process; others unchanged.

    A bare "cuda" with no GPU visible is a ValueError. The claimed device also becomes torch's
    current device, so code that says "cuda" lands on it."""
    if device != "cuda":
        return device
    import torch

    if not torch.cuda.is_available():
        raise ValueError("device 'cuda' was asked for but no CUDA GPU is visible; use device: cpu")
    n = torch.cuda.device_count()
    ids = gpu_uuids(n)
    index = 0
    if ids is not None or n > 1:
        ids = ids or device_ids(n, os.environ.get("CUDA_VISIBLE_DEVICES"))
        index = claim_index(ids, lock_dir or default_lock_dir())
        log.info("claimed GPU cuda:%d (%s) of %d", index, ids[index], n)
    torch.cuda.set_device(index)
    free, total = torch.cuda.mem_get_info(index)
    if total - free > BUSY_BYTES:
        log.warning(
            "GPU cuda:%d already has %.1f GiB of %.1f GiB in use by other programs: this job "
            "may run out of memory (nvidia-smi shows who)", index, (total - free) / 2**30,
            total / 2**30,
        )  # fmt: skip
    return f"cuda:{index}"

"""The per-job GPU claim: device ids from CUDA_VISIBLE_DEVICES, one exclusive lock per GPU and
process (released when the process ends), a one-line error when every GPU is held."""

from __future__ import annotations

import subprocess
import sys

import pytest

from grpo_dial.policy import devices


def test_device_ids_follow_cuda_visible_devices():
    assert devices.device_ids(3, None) == ["0", "1", "2"]
    assert devices.device_ids(2, "4,7") == ["4", "7"]
    assert devices.device_ids(2, "GPU-aa, GPU-bb,") == ["GPU-aa", "GPU-bb"]
    assert devices.device_ids(2, "") == ["0", "1"]


def child_claims(ids: list[str], lock_dir) -> str:
    """What another process gets: the claimed index, or 'busy' when every GPU is held."""
    script = (
        "from grpo_dial.policy import devices\n"
        "try:\n"
        f"    print(devices.claim_index({ids!r}, {str(lock_dir)!r}, timeout=0))\n"
        "except ValueError as error:\n"
        "    print('busy', error)\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


def test_claims_are_exclusive_per_process_and_end_with_it(tmp_path):
    assert devices.claim_index(["0", "1"], tmp_path, timeout=0) == 0
    assert devices.claim_index(["0", "1"], tmp_path, timeout=0) == 0  # same process, same GPU
    assert child_claims(["0", "1"], tmp_path) == "1"  # another job gets the other GPU
    busy = child_claims(["0"], tmp_path)
    assert busy.startswith("busy all 1 GPUs are claimed by other jobs"), busy
    # the child has exited: the kernel dropped its lock, so GPU 1 is free again
    assert devices.claim_index(["1"], tmp_path, timeout=0) == 0
    devices.release(tmp_path)
    assert child_claims(["0", "1"], tmp_path) == "0"


def test_all_busy_times_out_with_one_line(tmp_path):
    held = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time; from grpo_dial.policy import devices; "
            f"devices.claim_index(['0'], {str(tmp_path)!r}, timeout=0); "
            "print('held', flush=True); sys.stdin.read()",
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert held.stdout.readline().strip() == "held"
        with pytest.raises(ValueError, match="all 1 GPUs are claimed by other jobs"):
            devices.claim_index(["0"], tmp_path, timeout=0.05, poll=0.01)
    finally:
        held.stdin.close()
        held.wait(timeout=30)
    assert devices.claim_index(["0"], tmp_path, timeout=0) == 0
    devices.release(tmp_path)


def test_resolve_device_passes_explicit_devices_through():
    assert devices.resolve_device("cpu") == "cpu"
    assert devices.resolve_device("cuda:3") == "cuda:3"
    if not __import__("torch").cuda.is_available():
        with pytest.raises(ValueError, match="no CUDA GPU is visible"):
            devices.resolve_device("cuda")
    with pytest.raises(ValueError, match="empty"):
        devices.claim_index([], "/nonexistent-never-created")


def test_a_symlinked_lock_file_is_refused_and_its_target_untouched(tmp_path):
    """Another user's symlink gpu-0.lock -> a victim file: opened with O_NOFOLLOW, the claim
    stops with one line and the target is neither followed, truncated nor written."""
    locks = tmp_path / "locks"
    locks.mkdir(mode=0o700)
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    (locks / "gpu-0.lock").symlink_to(victim)
    with pytest.raises(ValueError, match="gpu-0.lock is a symlink; refusing to follow it"):
        devices.claim_index(["0"], locks, timeout=0)
    assert victim.read_text() == "precious\n"


def test_lock_directory_is_private_and_checked(tmp_path, monkeypatch):
    monkeypatch.delenv(devices.LOCK_DIR_ENV, raising=False)
    assert devices.default_lock_dir().name == f"grpo-dial-gpu-locks-{__import__('os').getuid()}"
    made = devices.private_dir(tmp_path / "new" / "locks")
    assert made.stat().st_mode & 0o777 == 0o700
    devices.claim_index(["7"], made, timeout=0)
    assert (made / "gpu-7.lock").stat().st_mode & 0o777 == 0o600
    assert (made / "gpu-7.lock").read_text().strip() == str(__import__("os").getpid())
    devices.release(made)
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    with pytest.raises(ValueError, match="writable by others"):
        devices.claim_index(["0"], shared, timeout=0)
    link = tmp_path / "link"
    link.symlink_to(made)
    with pytest.raises(ValueError, match="not a plain directory"):
        devices.private_dir(link)


def test_busy_message_names_the_holding_process(tmp_path):
    held = subprocess.Popen(
        [sys.executable, "-c",
         "import sys; from grpo_dial.policy import devices; "
         f"devices.claim_index(['GPU-x'], {str(tmp_path)!r}, timeout=0); "
         "print('held', flush=True); sys.stdin.read()"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert held.stdout.readline().strip() == "held"
        with pytest.raises(ValueError, match=rf"GPU-x by pid {held.pid}\b"):
            devices.claim_index(["GPU-x"], tmp_path, timeout=0)
    finally:
        held.stdin.close()
        held.wait(timeout=30)


def test_visible_gpu_count_reads_the_machine_without_torch(tmp_path, monkeypatch):
    assert devices.visible_gpu_count("0,1,2", smi=None) == 3
    assert devices.visible_gpu_count("GPU-aa,GPU-bb", smi=None) == 2
    assert devices.visible_gpu_count("", smi=None) == 0
    assert devices.visible_gpu_count("0,-1,2", smi=None) == 1  # CUDA stops at an invalid entry
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    smi = tmp_path / "fake-smi"
    smi.write_text("#!/bin/sh\necho 'GPU 0: H100 (UUID: GPU-a)'\necho 'GPU 1: H100'\n")
    smi.chmod(0o755)
    assert devices.visible_gpu_count(smi=str(smi)) == 2
    assert devices.visible_gpu_count(smi=str(tmp_path / "missing")) == 0
    assert devices.visible_gpu_count(smi=None) == 0

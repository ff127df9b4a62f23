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

"""The scheduler's GPU resource: one GPU job at a time per visible GPU, counted without torch."""

from __future__ import annotations

import sys

from grpo_dial.policy.devices import visible_gpu_count


def gpu_jobs(gpu_per_job: int, visible: int | None = None) -> int:
    """GPU jobs at once when no `--resources gpu=N` was given: this machine's GPU count, or 1
    for a GPU config on a CPU machine (its jobs would stop at device 'cuda' with one line);
    0 jobs' worth on a CPU config, where no job asks for a GPU."""
    visible = visible_gpu_count() if visible is None else visible
    if gpu_per_job:
        print(
            f"GPU jobs at once: {visible or gpu_per_job} (visible GPUs: {visible}; "
            "--resources gpu=N to change)",
            file=sys.stderr,
        )
    return visible or gpu_per_job

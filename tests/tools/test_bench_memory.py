"""Peak tensor memory of a step on the CPU, above what was allocated at its start."""

from __future__ import annotations

import torch

from grpo_dial.tools.bench.memory import PeakMemory

MIB = 2**20


def test_peak_counts_what_is_allocated_inside_not_before() -> None:
    before = torch.ones(4 * MIB // 4)  # 4 MiB allocated before start(): not counted
    mem = PeakMemory("cpu")
    mem.start()
    a = torch.ones(2 * MIB // 4)  # 2 MiB
    del a
    b = torch.ones(MIB // 4)  # 1 MiB after 2 MiB freed: the peak stays 2 MiB
    peak = mem.stop()
    del b, before
    assert 2 * MIB <= peak < 3 * MIB
    assert mem.peak == peak

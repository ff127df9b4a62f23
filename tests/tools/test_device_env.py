"""The device check measures the GPU it names: `--device cuda:1` makes cuda:1 current and every
reading (synchronize, peak reset, allocated, peak) names cuda:1. Recorded with the CUDA calls
replaced, since these machines have no GPU."""

from __future__ import annotations

import torch

from grpo_dial.tools.device_env import Device


def test_a_numbered_gpu_is_set_and_every_reading_names_it(monkeypatch):
    calls = []

    def record(name, value=0):
        return lambda *args: calls.append((name, *args)) or value

    monkeypatch.setattr(torch.cuda, "set_device", record("set_device"))
    monkeypatch.setattr(torch.cuda, "synchronize", record("synchronize"))
    monkeypatch.setattr(torch.cuda, "reset_peak_memory_stats", record("reset"))
    monkeypatch.setattr(torch.cuda, "memory_allocated", record("allocated", 100))
    monkeypatch.setattr(torch.cuda, "max_memory_allocated", record("max", 350))
    gpu = torch.device("cuda:1")
    device = Device("cuda:1")
    assert calls == [("set_device", gpu)]
    base = device.start()
    assert (base, device.peak(base)) == (100, 250)
    assert calls[1:] == [("synchronize", gpu), ("reset", gpu), ("allocated", gpu),
                         ("synchronize", gpu), ("max", gpu)]  # fmt: skip


def test_a_bare_cuda_or_the_cpu_sets_nothing(monkeypatch):
    calls = []
    monkeypatch.setattr(torch.cuda, "set_device", lambda *a: calls.append(a))
    Device("cuda")
    cpu = Device("cpu")
    assert calls == [] and (cpu.start(), cpu.peak(0)) == (0, None)

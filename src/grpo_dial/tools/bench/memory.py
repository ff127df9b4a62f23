"""Peak tensor memory of one step: the most bytes allocated between start() and stop() above
what was allocated at start().

On CUDA, max_memory_allocated after a reset; on the CPU, the running sum of torch.profiler's
memory events (allocations positive, frees negative). The profiler slows the step down, so the
bench measures memory in separate, untimed steps.
"""

from __future__ import annotations


class PeakMemory:
    """Peak tensor bytes allocated between start() and stop() above the level at start()."""

    def __init__(self, device: str) -> None:
        self.cuda = str(device).startswith("cuda")
        self.peak: int | None = None

    def start(self) -> None:
        import torch

        if self.cuda:
            torch.cuda.synchronize()
            self.base = torch.cuda.memory_allocated()
            torch.cuda.reset_peak_memory_stats()
        else:
            from torch.profiler import ProfilerActivity, profile

            self.prof = profile(activities=[ProfilerActivity.CPU], profile_memory=True)
            self.prof.start()

    def stop(self) -> int:
        import numpy as np
        import torch

        if self.cuda:
            torch.cuda.synchronize()
            self.peak = int(torch.cuda.max_memory_allocated() - self.base)
            return self.peak
        self.prof.stop()
        events = self.prof.profiler.kineto_results.events()
        mem = sorted(
            (e.start_ns(), e.nbytes())
            for e in events
            if e.name() == "[memory]" and e.device_type().name == "CPU"
        )
        cum = np.cumsum([b for _, b in mem]) if mem else np.zeros(1)
        self.peak = int(max(cum.max(), 0))
        return self.peak

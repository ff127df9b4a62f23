"""Wall time of one step, split by phase: generation, scoring, and training = the rest.

A phase is timed by wrapping the function that does it (our trainer's generate_groups and score,
TRL's _generate and _calculate_rewards) so its calls add their wall seconds to a per-step sink;
the step itself is timed around the whole call.
"""

from __future__ import annotations

import contextlib
import math
import statistics
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field


@dataclass
class SideTimes:
    """Per timed step of one side: seconds in total and per phase, completion tokens."""

    total: list[float] = field(default_factory=list)
    generation: list[float] = field(default_factory=list)
    scoring: list[float] = field(default_factory=list)
    tokens: list[int] = field(default_factory=list)
    informative: list[float] = field(default_factory=list)  # rows with A != 0 (ours)
    peak_bytes: int | None = None

    def add(self, step: dict[str, float]) -> None:
        """One timed step: total, generation, scoring (s), tokens, and informative if present."""
        self.total.append(step["total"])
        self.generation.append(step["generation"])
        self.scoring.append(step["scoring"])
        self.tokens.append(step["tokens"])
        if "informative" in step:
            self.informative.append(step["informative"])

    def summary(self) -> dict[str, float]:
        """Median / min / max s/step, median phases, completion tokens/s, peak MiB."""
        med = statistics.median
        phases = zip(self.total, self.generation, self.scoring, strict=True)
        train = [t - g - s for t, g, s in phases]
        return {
            "steps": len(self.total),
            "s_per_step_median": med(self.total),
            "s_per_step_min": min(self.total),
            "s_per_step_max": max(self.total),
            "tokens_per_s": sum(self.tokens) / sum(self.total),
            "tokens_per_step": sum(self.tokens) / len(self.tokens),
            "generation_s": med(self.generation),
            "scoring_s": med(self.scoring),
            "training_s": med(train),
            "peak_mib": math.nan if self.peak_bytes is None else self.peak_bytes / 2**20,
            "informative_rows": statistics.mean(self.informative) if self.informative else None,
        }


def timing(original: Callable, name: str, sink: Callable[[], dict[str, float]]) -> Callable:
    """original, adding each call's wall time to sink()[name]."""

    def wrapper(*args, **kwargs):
        t = time.perf_counter()
        try:
            return original(*args, **kwargs)
        finally:
            times = sink()
            times[name] = times.get(name, 0.0) + time.perf_counter() - t

    return wrapper


@contextlib.contextmanager
def timed(module, name: str, sink: dict[str, float]) -> Iterator[None]:
    """Replace module.name by a wrapper adding its wall time to sink[name] (restored after)."""
    original = getattr(module, name)
    setattr(module, name, timing(original, name, lambda: sink))
    try:
        yield
    finally:
        setattr(module, name, original)


def wrap_method(obj, name: str, sink: Callable[[], dict[str, float]]) -> None:
    """obj.name, for good, adding each call's wall time to sink()[name]."""
    setattr(obj, name, timing(getattr(obj, name), name, sink))

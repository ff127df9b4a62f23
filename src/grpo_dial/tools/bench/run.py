"""What `grpo-dial bench` runs: each requested step workload (ours against TRL's, interleaved)
and, when asked, the pipeline checks, into one JSON-ready dict."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from grpo_dial.tools.bench.pipeline import time_difficulty, time_dry_runs, torch_at_dag_build
from grpo_dial.tools.bench.step import run_step_bench
from grpo_dial.tools.bench.workload import WORKLOADS, StepSettings


@dataclass(frozen=True)
class BenchOptions:
    workloads: tuple[str, ...] = WORKLOADS
    steps: int = 20
    warmup: int = 3
    threads: int | None = None
    pipeline: bool = False
    settings: dict = field(default_factory=dict)  # StepSettings overrides (tests: tiny sizes)


def run_bench(options: BenchOptions, progress: bool = True) -> dict:
    """Every requested workload (and the pipeline checks): a JSON-ready dict."""
    import torch

    if options.threads is not None:
        if options.threads < 1:
            raise ValueError(f"--threads must be >= 1, got {options.threads}")
        torch.set_num_threads(options.threads)
    if options.steps < 1 or options.warmup < 0:
        raise ValueError("--steps must be >= 1 and --warmup >= 0")
    out: dict = {"threads": torch.get_num_threads(), "steps": {}}
    for workload in options.workloads:
        overrides = dict(options.settings)
        if workload == "free":
            overrides.setdefault("max_new_tokens", 64)
        settings = StepSettings(workload=workload, **overrides)
        out["steps"][workload] = run_step_bench(settings, options.steps, options.warmup, progress)
        out.setdefault("settings", {})[workload] = asdict(settings)
    if options.pipeline:
        out["pipeline"] = {
            **time_difficulty(),
            "dry_run_s": time_dry_runs(),
            "torch_imported_at_dag_build": torch_at_dag_build(),
        }
    return out

"""`grpo-dial bench`: the trainer's own GRPO step against TRL's GRPOTrainer step, and the
pipeline's fast paths.

- workload: the two step workloads (fixed, free): model, tokenizer, task and prompt pool, the
  same for both sides; parity: the fixed workload's task.
- ours: our side, one call of the training loop's own step function per bench step.
- step: TRL's side, and the two sides interleaved in one process.
- timing, memory: what one step is measured by (wall time per phase, peak tensor memory).
- pipeline: the difficulty analysis on a Big-Math-sized table, `snakemake -n` per config, and
  whether building the DAG imports torch.
- run: the options and the run over workloads; report: the table and JSON.
"""

from grpo_dial.tools.bench.report import format_report, to_json
from grpo_dial.tools.bench.run import BenchOptions, run_bench

__all__ = ["BenchOptions", "format_report", "run_bench", "to_json"]

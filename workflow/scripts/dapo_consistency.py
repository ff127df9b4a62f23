"""Rule `dapo_consistency`: a thin call into grpo_dial.stages.dapo_consistency (which also runs outside Snakemake)."""

from grpo_dial.stages import dapo_consistency, run_rule

run_rule(dapo_consistency, snakemake)  # noqa: F821 (injected by Snakemake)

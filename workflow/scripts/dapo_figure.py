"""Rule `dapo_figure`: a thin call into grpo_dial.stages.dapo_figure (which also runs outside Snakemake)."""

from grpo_dial.stages import dapo_figure, run_rule

run_rule(dapo_figure, snakemake)  # noqa: F821 (injected by Snakemake)

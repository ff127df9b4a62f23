"""Rule `difficulty_figure`: a thin call into grpo_dial.stages.difficulty_figure (which also runs outside Snakemake)."""

from grpo_dial.stages import difficulty_figure, run_rule

run_rule(difficulty_figure, snakemake)  # noqa: F821 (injected by Snakemake)

"""Rule `difficulty_analysis`: a thin call into grpo_dial.stages.difficulty_analysis (which also runs outside Snakemake)."""

from grpo_dial.stages import difficulty_analysis, run_rule

run_rule(difficulty_analysis, snakemake)  # noqa: F821 (injected by Snakemake)

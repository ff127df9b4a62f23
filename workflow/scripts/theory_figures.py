"""Rule `theory_figures`: a thin call into grpo_dial.stages.theory_figures (which also runs outside Snakemake)."""

from grpo_dial.stages import theory_figures, run_rule

run_rule(theory_figures, snakemake)  # noqa: F821 (injected by Snakemake)

"""Rule `theory_tables`: a thin call into grpo_dial.stages.theory_tables (which also runs outside Snakemake)."""

from grpo_dial.stages import theory_tables, run_rule

run_rule(theory_tables, snakemake)  # noqa: F821 (injected by Snakemake)

"""Rule `simulate`: a thin call into grpo_dial.stages.simulate (which also runs outside Snakemake)."""

from grpo_dial.stages import simulate, run_rule

run_rule(simulate, snakemake)  # noqa: F821 (injected by Snakemake)

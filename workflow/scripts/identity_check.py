"""Rule `identity_check`: a thin call into grpo_dial.stages.identity_check (which also runs outside Snakemake)."""

from grpo_dial.stages import identity_check, run_rule

run_rule(identity_check, snakemake)  # noqa: F821 (injected by Snakemake)

"""Rule `passrates`: a thin call into grpo_dial.stages.passrates (which also runs outside Snakemake)."""

from grpo_dial.stages import passrates, run_rule

run_rule(passrates, snakemake)  # noqa: F821 (injected by Snakemake)

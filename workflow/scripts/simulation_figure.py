"""Rule `simulation_figure`: a thin call into grpo_dial.stages.simulation_figure (which also runs outside Snakemake)."""

from grpo_dial.stages import simulation_figure, run_rule

run_rule(simulation_figure, snakemake)  # noqa: F821 (injected by Snakemake)

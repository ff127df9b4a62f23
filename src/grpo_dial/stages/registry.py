"""Every rule's stage, in one table: the generic rule script (`workflow/scripts/stage.py`)
dispatches on the rule's name through it, and so does `grpo-dial stage <rule>`.

A stage is `stage(input, output, params)` in grpo_dial.stages.<module> (grpo_dial.stages.run).
A rule whose name differs from its stage's (two rules share `channel_samples`; `summary`
writes the markdown) says so here, nowhere else.
"""

from __future__ import annotations

import importlib

from grpo_dial.stages.run import Stage

RULES = {  # rule -> "<module>.<function>" under grpo_dial.stages
    "download": "download.download",
    "passrates": "passrates.passrates",
    "theory_tables": "theory.theory_tables",
    "identity_check": "theory.identity_check",
    "group_bias": "theory.group_bias",
    "estimator_tables": "theory.estimator_tables",
    "difficulty_analysis": "difficulty.difficulty_analysis",
    "simulate": "simulate.simulate",
    "dapo_consistency": "dapo.dapo_consistency",
    "theory_figures": "theory.theory_figures",
    "difficulty_figure": "difficulty.difficulty_figure",
    "simulation_figure": "simulate.simulation_figure",
    "dapo_figure": "dapo.dapo_figure",
    "length_bias": "length_bias.length_bias",
    "length_bias_figure": "length_bias.length_bias_figure",
    "length_pressure": "length_bias.length_pressure",
    "length_pressure_external": "length_bias.length_pressure_external",
    "length_pressure_figure": "length_bias.length_pressure_figure",
    "convert_smollm": "models.convert_smollm",
    "warm_start": "policy.warm_start",
    "estimate_pass_rates": "policy.estimate_pass_rates",
    "calibrate_lr": "policy.calibrate_lr",
    "train": "policy.train",
    "decompose_length": "training.decompose_length",
    "training_summary": "training.training_summary",
    "training_figures": "training.training_figures",
    "window_sensitivity": "training.window_sensitivity",
    "real_lengths": "real_lengths.real_lengths",
    "real_lengths_figure": "real_lengths.real_lengths_figure",
    "summary": "summary.summary_markdown",
    "channel_base": "channel.channel_samples",
    "channel_run": "channel.channel_samples",
    "channel_summary": "channel.channel_summary",
    "channel_figures": "channel.channel_figures",
    "allocation_comparison": "allocation.allocation_comparison",
    "allocation_figure": "allocation.allocation_figure",
    "import_run": "external.import_run",
    "diagnose_run": "external.diagnose_run",
    "external_figure": "external.external_figure",
    "aware_base": "aware.aware_base",
    "aware_summary": "aware.aware_summary",
    "aware_figure": "aware.aware_figure",
    "aware_bridge": "aware.aware_bridge",
    "aware_rates": "aware.aware_rates",
    "aware_sweep_cell": "aware.aware_sweep_cell",
    "aware_frozen_cell": "aware.aware_sweep_cell",  # the tail-frozen control (params frozen)
    "aware_probe": "aware.aware_probe",
    "aware_later_probe": "aware_later.aware_later_probe",
    "aware_dose": "aware.aware_dose",
    "aware_dose_figure": "aware.aware_dose_figure",
}


def stage_for(rule: str) -> Stage:
    """The stage function of `rule`, imported on demand (a figure rule never imports torch)."""
    if rule not in RULES:
        raise ValueError(f"unknown rule {rule!r}; valid rules: {', '.join(sorted(RULES))}")
    module, function = RULES[rule].rsplit(".", 1)
    return getattr(importlib.import_module(f"grpo_dial.stages.{module}"), function)

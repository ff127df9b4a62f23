"""Predicted wall seconds of the aware sweep's jobs (target aware_dose_figure) on one device:
each job's steps through the step-time model (policy/step_time.py), from the config's sizes and
the base policy's prompt and response lengths.

  warm_start         steps x batch_size demonstrations, update only
  aware_base         channel.prompts x BASE_ROUNDS prompts sampled channel.samples times
                     each, the responses' forward (the masked mass) and the kernel:
                     kernel_rows forwards and backwards of whole sequences, once per mode
  aware_probe        the base sample and the kernel again, then probe_batches trainer steps per
                     (level, arm), twice where their gradients do not fit in memory
                     (analysis/aware/probe.probe_passes)
  aware_sweep_cell   seeds x steps trainer steps, one cell per (optimizer, level, arm)
  aware_frozen_cell  seeds x steps trainer steps (the control)

A trainer step of prompts_per_step prompts x group_size is `step_seconds`; loading the model,
the analysis jobs and the figure are left out.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pandas as pd

from grpo_dial.analysis.aware.kernel import BASE_ROUNDS
from grpo_dial.analysis.aware.probe import probe_passes
from grpo_dial.policy.memory import shape_of
from grpo_dial.policy.step_time import Device, matmul_params, step_seconds


def aware_job_seconds(config: Mapping, arms: Sequence[str], device: Device, prompt: float,
                      mean_response: float, longest: int) -> pd.DataFrame:  # fmt: skip
    """One row per job kind: job, jobs, steps (trainer steps per job) and seconds (all of that
    kind's jobs), for a workflow config (overlays merged, schema defaults filled) training
    `arms` (the Plan's), whose base policy writes responses of mean_response tokens (longest
    `longest`) after prompts of `prompt` tokens."""
    shape = shape_of(config["model"]["base"])
    train, sweep, channel = config["train"], config["aware_sweep"], config["channel"]
    m, g = train["prompts_per_step"], train["group_size"]
    step = step_seconds(shape, m, g, prompt, mean_response, longest, device).total
    n = matmul_params(shape)
    per_token = {"forward": 2 * n / device.flops, "update": 6 * n / device.flops}
    tokens = prompt + mean_response  # a whole sequence, its prompt not shared
    ws = config["warm_start"]
    warm = ws["steps"] * ws["batch_size"] * tokens * per_token["update"]
    drawn, samples = channel["prompts"] * BASE_ROUNDS, channel["samples"]
    sample = step_seconds(shape, drawn, samples, prompt, mean_response, longest,
                          device).generation  # fmt: skip
    rows = drawn * samples
    kernel = 2 * min(sweep["kernel_rows"], rows) * tokens * per_token["update"]
    base = sample + rows * tokens * per_token["forward"] + kernel
    levels, seeds, steps = sweep["levels"], train["seeds"], train["steps"]
    cells = len(sweep["optimizers"]) * len(levels) * len(arms)
    probe_steps = (len(levels) * len(arms) * sweep["probe_batches"]
                   * probe_passes(sweep["probe_batches"], shape.params))  # fmt: skip
    rows_out = [
        ("warm_start", 1, ws["steps"], warm),
        ("aware_base", 1, 0, base),
        ("aware_probe", 1, probe_steps, sample + kernel + probe_steps * step),
        ("aware_sweep_cell", cells, len(seeds) * steps, cells * len(seeds) * steps * step),
        ("aware_frozen_cell", 1, len(seeds) * steps, len(seeds) * steps * step),
    ]
    return pd.DataFrame(rows_out, columns=["job", "jobs", "steps", "seconds"])

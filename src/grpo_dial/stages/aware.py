"""Rule file aware.smk: the aware-tail runs against the closed form (issue 27, analysis/aware.py).

`aware_summary` reads every run's responses and steps, and writes the per-step table (tail by mode
and by correctness, measured awareness, the closed form's per-group update at that state), the
per-run drifts and the per-dial drift table with predicted ratios. `aware_figure` draws them.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

import pandas as pd

from grpo_dial.tables import read_table, write_table

log = logging.getLogger("grpo_dial")


def aware_summary(input: Mapping, output: Mapping, params: Mapping) -> None:
    """Tables aware/steps.parquet, aware/runs.csv, aware/drift.csv and aware/decomposition.csv."""
    from grpo_dial.analysis.aware import (
        decomposition_table,
        drift_table,
        predicted_step,
        run_decomposition,
        run_drift,
        step_table,
    )
    from grpo_dial.core.dial import arm_from_fields

    train = params["train"]
    G, M = int(train["group_size"]), int(train["prompts_per_step"])
    runs = [(str(d), int(s)) for d, s in params["runs"]]
    all_steps, per_run, terms = [], [], []
    for (d, s), resp, stp in zip(runs, input["responses"], input["steps"], strict=True):
        dial = arm_from_fields(params["arms"][d]).dial
        responses = read_table(resp)
        steps = step_table(responses)
        terms.append(
            {"dial": d, "seed": s, **run_decomposition(responses, params["window_fraction"])}
        )
        uw, uc = predicted_step(steps, dial, G, M)
        all_steps.append(steps.assign(dial=d, seed=s, u_wrong=uw, u_correct=uc))
        drift = run_drift(
            steps, read_table(stp), dial, G, M, float(train["lr"]), train.get("grad_clip"),
            params["window_fraction"],
        )  # fmt: skip
        per_run.append({"dial": d, "seed": s, **drift})
    runs_table = pd.DataFrame(per_run)
    drift = drift_table(runs_table, reference=params["reference"])
    log.info(
        "aware tail drift (log mean tail, last - first window), 90%% over seeds:\n%s",
        drift.to_string(index=False, float_format=lambda x: f"{x:.3g}"),
    )
    write_table(pd.concat(all_steps, ignore_index=True), output["steps"])
    write_table(runs_table, output["runs"])
    write_table(drift, output["drift"])
    write_table(decomposition_table(pd.DataFrame(terms)), output["decomposition"])


def aware_figure(input: Mapping, output: Mapping, params: Mapping) -> None:
    from grpo_dial.core.arm_names import ARM_NAMES
    from grpo_dial.figures import save
    from grpo_dial.figures.aware import aware_figure as draw
    from grpo_dial.figures.aware import decomposition_figure

    steps, drift = read_table(input["steps"]), read_table(input["drift"])
    fig = draw(steps, drift, params["reference"], names=ARM_NAMES)
    save(fig, output["png"], output["pdf"])
    fig = decomposition_figure(read_table(input["decomposition"]), names=ARM_NAMES)
    save(fig, output["decomposition_png"])


def aware_bridge(input: Mapping, output: Mapping, params: Mapping) -> None:
    """aware/bridge.csv: analysis/aware_bridge.length_bridge on the math_cot_100 responses (8
    samples of one model per problem; the GSM8K log's 4 solutions come from different models)."""
    from grpo_dial.analysis.aware_bridge import length_bridge
    from grpo_dial.analysis.real_lengths import MATH_COT

    responses = read_table(input["responses"])
    responses = responses[responses["source"] == MATH_COT]
    if responses.empty:
        raise ValueError(f"no {MATH_COT} responses in {input['responses']}")
    table = length_bridge(responses, n_boot=int(params["n_boot"]), seed=int(params["seed"]))
    log.info("GRPO's 1/|o| push on %s lengths:\n%s", MATH_COT, table.to_string(index=False))
    write_table(table.assign(source=MATH_COT), output["bridge"])

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
    """Tables aware/steps.parquet, aware/runs.csv and aware/drift.csv."""
    from grpo_dial.analysis.aware import drift_table, predicted_step, run_drift, step_table
    from grpo_dial.train.arms import read_arm

    train = params["train"]
    G, M = int(train["group_size"]), int(train["prompts_per_step"])
    runs = [(str(d), int(s)) for d, s in params["runs"]]
    all_steps, per_run = [], []
    for (d, s), resp, stp in zip(runs, input["responses"], input["steps"], strict=True):
        dial, _ = read_arm(params["dials"][d], None, max_new_tokens=train["max_new_tokens"])
        steps = step_table(read_table(resp))
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


def aware_figure(input: Mapping, output: Mapping, params: Mapping) -> None:
    from grpo_dial.figures.aware import aware_figure as draw
    from grpo_dial.figures import save

    fig = draw(read_table(input["steps"]), read_table(input["drift"]), params["reference"])
    save(fig, output["png"], output["pdf"])

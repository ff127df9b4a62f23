"""Rule file channel.smk: the checking tail's channel and the tail drift of every dial.

`channel_samples` samples a policy (the base, or a run's final weights) on the training pool and
parses each response's tail; `channel_summary` gathers the channel per policy, the tail's
awareness of correctness per training step, and each dial's tail drift against the prediction.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

import pandas as pd

from grpo_dial.tables import read_table, write_table

log = logging.getLogger("grpo_dial")


def channel_samples(input: Mapping, output: Mapping, params: Mapping) -> None:
    """`samples` responses to each of the pool's first `prompts` prompts, as channel rows."""
    import torch

    from grpo_dial.analysis.channel import channel_rows, channel_summary
    from grpo_dial.data.tasks import get_task
    from grpo_dial.policy.model import load_policy
    from grpo_dial.policy.rollout import generate_groups
    from grpo_dial.stages.policy import base_model_path

    if params.get("threads"):
        torch.set_num_threads(int(params["threads"]))
    spec, settings = params["task"], params["channel"]
    task = get_task(spec["name"], **spec.get("options", {}))
    if not getattr(task, "tail_checks", 0):
        raise ValueError("the channel needs a task with a checking tail (task.options.tail_checks)")
    path = base_model_path(input, params)
    model, tokenizer = load_policy(path, device=params["device"], dtype="float32")
    pool = task.problems("train", params["pool"], params["pool_seed"])[: settings["prompts"]]
    generator = torch.Generator(device=params["device"]).manual_seed(int(settings["seed"]))
    with torch.no_grad():
        r = generate_groups(
            model,
            tokenizer,
            pool,
            settings["samples"],
            params["max_new_tokens"],
            settings["temperature"],
            generator,
        )
    rows = channel_rows(task, r.problems, r.texts, r.finished.tolist())
    log.info("channel of %s:\n%s", path, channel_summary(rows).to_string())
    write_table(rows, output["samples"])


def channel_summary(input: Mapping, output: Mapping, params: Mapping) -> None:
    """Tables: the channel per policy, tail awareness per step, tail drift per run and per dial."""
    import numpy as np

    from grpo_dial.analysis.channel import (
        channel_summary as summarize,
    )
    from grpo_dial.analysis.channel import (
        drift_by_dial,
        prediction_table,
        run_drift,
        tail_awareness,
    )
    from grpo_dial.core.dial import Dial
    from grpo_dial.core.theory import expected_sigma
    from grpo_dial.passrates.tables import read_passrates

    runs = [(str(d), int(s)) for d, s in params["runs"]]
    policies = [("base", -1)] + runs
    channel = pd.DataFrame(
        [
            {"dial": d, "seed": s, **summarize(read_table(path)).to_dict()}
            for (d, s), path in zip(policies, input["samples"], strict=True)
        ]
    )
    steps, per_run = [], []
    for (d, s), resp, terms in zip(runs, input["responses"], input["terms"], strict=True):
        aware = tail_awareness(read_table(resp))
        steps.append(aware.assign(dial=d, seed=s))
        drift = run_drift(aware, read_table(terms), params["window_fraction"])
        per_run.append({"dial": d, "seed": s, **drift})
    awareness = pd.concat(steps, ignore_index=True)
    runs_table = pd.DataFrame(per_run)
    p = read_passrates(input["passrates"])["p_hat"].to_numpy(dtype=float)
    dials = {d: Dial(**params["dials"][d]) for d in dict.fromkeys(runs_table["dial"])}
    ratios = prediction_table(p, params["group_size"], dials)  # fields resolved at DAG build
    drift = drift_by_dial(runs_table, ratios, reference=params["reference"]).merge(
        ratios[["dial", "std_power", "length_norm"]], on="dial"
    )
    gap = drift[drift["quantity"] == "gap_drift"]
    log.info(
        "tail drift (within-group wrong - correct gap), 90%% over seeds:\n%s",
        gap.to_string(index=False, float_format=lambda x: f"{x:.3g}"),
    )
    log.info(
        "pool: mean pass rate %.4f, E[sigma] at G=%d %.4f",
        float(np.mean(p)),
        params["group_size"],
        float(np.mean(expected_sigma(p, params["group_size"]))),
    )
    write_table(channel, output["channel"])
    write_table(awareness, output["awareness"])
    write_table(runs_table, output["runs"])
    write_table(drift, output["drift"])


def channel_figures(input: Mapping, output: Mapping, params: Mapping) -> None:
    """The channel figure and the per-arm-pair drift figure, from channel_summary's tables."""
    from grpo_dial.core.arm_names import display_names
    from grpo_dial.figures import save
    from grpo_dial.figures.channel import channel_figure, length_drift_runs_figure

    tables = read_table(input["channel"]), read_table(input["awareness"])
    fig = channel_figure(*tables, names=display_names())
    save(fig, output["channel_png"], output.get("channel_pdf"))
    fig = length_drift_runs_figure(
        read_table(input["drift"]),
        read_table(input["runs"]),
        reference=params["reference"],
        names=display_names(),
    )
    save(fig, output["drift_png"], output.get("drift_pdf"))

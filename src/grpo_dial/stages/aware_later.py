"""Rule file aware_later.smk: the one-step probe repeated at the SGD runs' later states.

`aware_later_probe` replays chosen runs of the sweep's SGD cells to chosen steps
(backends/own_replay.py; each replay checked against the stored cell), and at each state measures
what rule aware_probe measures at the base: the expected one-step move of each mode's continue
logit through the transformer, and the closed form through the kernel of that state's own sample
(analysis/aware/later.py). Rule aware_dose reads the table into aware_sweep/tail_shape.csv.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

import pandas as pd

from grpo_dial.tables import read_table, write_table

log = logging.getLogger("grpo_dial")


def aware_later_probe(input: Mapping, output: Mapping, params: Mapping) -> None:
    """aware_sweep/later_probe.csv (analysis/aware/later.LATER_COLUMNS): for every level of
    params `levels`, arm of params `arms` (dial -> fields) and seed of params later `seeds`, the
    SGD run replayed to step 0 and each of later `steps`; at each state the state's own sample
    (rule aware_base's recipe and seed), its J restricted to the weights SGD moves, `batches`
    probe batches (each also taken as a whole SGD step at the cells' rate), the closed form
    through that state's kernel, the modes' logits and the run's move after the state (input
    cells: those runs' stored step tables). At step 0 the J must give aware/kernel.csv's row of
    those weights."""
    import torch

    from grpo_dial.analysis.aware.dose import kernel_of, level_awareness, sgd_prediction
    from grpo_dial.analysis.aware.grid import LEVELS
    from grpo_dial.analysis.aware.kernel import kernel_entries
    from grpo_dial.analysis.aware.later import check_replay, run_end, state_rows
    from grpo_dial.analysis.aware.probe import check_kernel
    from grpo_dial.analysis.aware.runs import step_table
    from grpo_dial.backends import own_replay
    from grpo_dial.core.dial import arm_from_fields
    from grpo_dial.policy.model import load_policy
    from grpo_dial.stages.aware import _base_sample, _task
    from grpo_dial.stages.policy import base_model_path

    if params.get("threads"):
        torch.set_num_threads(int(params["threads"]))
    later, train = params["later"], dict(params["train"])
    rates = read_table(input["rate"]).iloc[0]
    lr, weights = float(rates["lr"]), str(rates.get("sgd_weights", "all"))
    train |= {"lr": lr, "optimizer": "sgd"}  # the SGD cells' own settings (aware_sweep_cell)
    kernel = kernel_of(read_table(input["kernel"]), weights)
    cells = pd.concat([read_table(p) for p in input["cells"]], ignore_index=True)
    base_dir = base_model_path(input, params)
    model, tokenizer = load_policy(base_dir, device=params["device"], dtype="float32")
    base_sample = _base_sample(model, tokenizer, params)[0]  # the base's own positions
    options = params["task"].get("options", {})
    rows = int(params.get("kernel_rows", 512))  # the responses J is taken over (aware_base's)
    out = []
    for level in params["levels"]:
        compute, estimate = LEVELS[level]
        task = _task({**params["task"], "options": {**options, "compute_accuracy": compute,
                                                     "estimate_accuracy": estimate}})  # fmt: skip
        problems = task.problems("train", params["pool"], params["pool_seed"])
        heldout = task.problems("heldout", 1, params["pool_seed"])
        a = level_awareness(level, float(options.get("estimate_rate", 0.5)))[1]
        for d, fields in params["arms"].items():
            arm = arm_from_fields(fields)
            for seed in later["seeds"]:
                cell = cells[(cells["optimizer"] == "sgd") & (cells["level"] == level)
                             & (cells["dial"] == d) & (cells["seed"] == int(seed))]  # fmt: skip
                if cell.empty:
                    raise ValueError(f"no stored SGD run of {d} at {level} with seed {seed} in "
                                     "the cells read: rerun rule aware_sweep_cell")  # fmt: skip
                updates, last = run_end(cell, float(params["window_fraction"]))
                for k in (0, *later["steps"]):
                    run = own_replay.replay(base_dir, task, problems, heldout, arm, train, seed,
                                            params["pool"], params["pool_seed"], int(k),
                                            params["device"], weights)  # fmt: skip
                    where = f"(sgd, {level}, {d}, seed {seed})"
                    check_replay(own_replay.replayed_steps(run), cell, where)
                    sample, table = _base_sample(run.model, tokenizer, params)
                    jw, jc = own_replay.state_gradients(run, sample, weights, rows)
                    if k == 0:
                        check_kernel(jw, jc, kernel)
                    state = step_table(table).iloc[0]
                    k_state = kernel_entries(jw, jc)
                    pred = sgd_prediction(arm.dial, pd.DataFrame([state]),
                                          pd.DataFrame([k_state]), level, options,
                                          train)  # fmt: skip
                    logits = own_replay.mode_logits(run.model, tokenizer, sample, rows)
                    logits_base = own_replay.mode_logits(run.model, tokenizer, base_sample, rows)
                    config = own_replay.cell_config(train, arm, params["pool"],
                                                    params["pool_seed"], int(seed),
                                                    params["device"])  # fmt: skip
                    batches = own_replay.probe_state(run, task, arm.dial, config,
                                                     int(later["batches"]), jw, jc, int(k),
                                                     (lr, sample, rows))  # fmt: skip
                    keys = {"level": level, "a": a, "dial": d, "seed": int(seed), "step": int(k),
                            "lr": lr, "updates": updates}  # fmt: skip
                    out += state_rows(keys, batches, pred, state, k_state, logits, logits_base,
                                       last)  # fmt: skip
                    log.info("later state %s step %d: probe wrong %.3g correct %.3g, tails "
                             "%.2f / %.2f", where, k, batches["wrong"].mean(),
                             batches["correct"].mean(), state["tail_estimate"],
                             state["tail_compute"])  # fmt: skip
    write_table(pd.DataFrame(out), output["later"])

"""Rule file aware.smk: the aware-tail runs against the closed form
(analysis/aware/runs.py per run, analysis/aware/seeds.py over seeds).

`aware_base` samples the base policy at step 0 (before any update) and measures its tangent kernel
of the tail; `aware_summary` reads every run's responses and steps and writes the per-step table,
the per-run (per-seed) drifts, the per-dial drift table with rank tests and predictions, the
truncated share per window and the length decomposition in tokens. `aware_figure` draws them.
The dose-response sweep (`aware_rates`, `aware_sweep_cell`, `aware_dose`, `aware_dose_figure`)
trains the config's arms at each awareness level in-process (analysis/aware/kernel.py) and
fits the dose-response (analysis/aware/dose.py).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

import pandas as pd

from grpo_dial.tables import read_table, write_table

log = logging.getLogger("grpo_dial")



def _threads(params: Mapping) -> None:
    import torch

    if params.get("threads"):
        torch.set_num_threads(int(params["threads"]))


def _task(spec: Mapping):
    from grpo_dial.data.tasks import task_from_spec

    return task_from_spec(spec)


def _base_sample(model, tokenizer, params: Mapping):
    """(rollouts, table): rule aware_base's sample of the base policy (every pool prompt's
    group of channel.samples, BASE_ROUNDS times, the channel's seed): the kernel's J's sample."""
    import numpy as np
    import torch

    from grpo_dial.analysis.aware.kernel import BASE_ROUNDS, base_responses

    task, settings = _task(params["task"]), params["channel"]
    pool = task.problems("train", params["pool"], params["pool_seed"])[: settings["prompts"]]
    generator = torch.Generator(device=params["device"]).manual_seed(int(settings["seed"]))
    rng = np.random.default_rng([int(settings["seed"]), 0x62617365])  # "base"
    return base_responses(
        model, tokenizer, task, pool * BASE_ROUNDS, settings["samples"],
        params["max_new_tokens"], settings["temperature"], generator, rng,
    )  # fmt: skip


def aware_base(input: Mapping, output: Mapping, params: Mapping) -> None:
    """aware/base_responses.parquet (the base policy's responses at step 0, as a run's responses
    table), aware/base.csv (their one-row step table and the masked special tokens' mass) and
    aware/kernel.csv (analysis.aware.kernel.tail_kernel)."""
    from grpo_dial.analysis.aware.kernel import special_mass, tail_kernel
    from grpo_dial.analysis.aware.runs import step_table
    from grpo_dial.policy.model import load_policy
    from grpo_dial.stages.policy import base_model_path

    _threads(params)
    model, tokenizer = load_policy(base_model_path(input, params), device=params["device"],
                                   dtype="float32")  # fmt: skip
    rollouts, table = _base_sample(model, tokenizer, params)
    base = step_table(table).assign(special_mass=special_mass(model, tokenizer, rollouts))
    weights = tuple(dict.fromkeys(("all", params.get("sgd_weights", "all"))))
    kernel = tail_kernel(model, tokenizer, rollouts, rows=int(params.get("kernel_rows", 512)),
                         weights=weights)  # fmt: skip
    log.info("base policy at step 0:\n%s\ntail kernel:\n%s", base.T.to_string(), kernel)
    write_table(table, output["responses"])
    write_table(base, output["base"])
    write_table(kernel, output["kernel"])


def _snr(task_options: Mapping, arms: Mapping, base: pd.DataFrame, train: Mapping) -> dict:
    """dial -> the contrast push's signal-to-noise ratio at the base state
    (analysis/aware_sim.push_moments)."""
    from grpo_dial.analysis.aware.dose import push_snr
    from grpo_dial.core.dial import arm_from_fields

    return {
        d: push_snr(arm_from_fields(fields).dial, task_options, base, train)["snr_contrast"]
        for d, fields in arms.items()
    }


def aware_summary(input: Mapping, output: Mapping, params: Mapping) -> None:
    """Tables aware/steps.parquet, aware/runs.csv (one row per seed), aware/drift.csv,
    aware/truncation.csv and aware/decomposition.csv."""
    from grpo_dial.analysis.aware.runs import (
        predicted_step,
        run_decomposition,
        run_drift,
        step_table,
    )
    from grpo_dial.analysis.aware.seeds import decomposition_table, drift_table, truncation_table
    from grpo_dial.core.dial import arm_from_fields

    train = params["train"]
    G, M = int(train["group_size"]), int(train["prompts_per_step"])
    base, base_resp = read_table(input["base"]), read_table(input["base_responses"])
    runs = [(str(d), int(s)) for d, s in params["runs"]]
    all_steps, per_run, terms = [], [], []
    for (d, s), resp, stp in zip(runs, input["responses"], input["steps"], strict=True):
        dial = arm_from_fields(params["arms"][d]).dial
        responses = read_table(resp)
        steps = step_table(responses)
        terms.append(
            {"dial": d, "seed": s,
             **run_decomposition(responses, params["window_fraction"], base_resp)}
        )  # fmt: skip
        uw, uc = predicted_step(steps, dial, G, M)
        all_steps.append(steps.assign(dial=d, seed=s, u_wrong=uw, u_correct=uc))
        drift = run_drift(
            steps, read_table(stp), dial, G, M, float(train["lr"]), train.get("grad_clip"),
            params["window_fraction"], base,
        )  # fmt: skip
        per_run.append({"dial": d, "seed": s, **drift})
    runs_table = pd.DataFrame(per_run)
    arms = {d: params["arms"][d] for d in dict.fromkeys(runs_table["dial"])}
    snr = _snr(params["task"].get("options", {}), arms, base, train)
    null = params.get("null") if params.get("null") in arms else None
    drift = drift_table(runs_table, reference=params["reference"], null=null, snr=snr)
    log.info(
        "aware tail drift (log(1 + tail), base -> last window), 90%% over seeds:\n%s",
        drift[drift["quantity"] == "contrast"].to_string(
            index=False, float_format=lambda x: f"{x:.3g}"
        ),
    )
    write_table(pd.concat(all_steps, ignore_index=True), output["steps"])
    write_table(runs_table, output["runs"])
    write_table(drift, output["drift"])
    write_table(truncation_table(runs_table), output["truncation"])
    write_table(decomposition_table(pd.DataFrame(terms)), output["decomposition"])


def aware_figure(input: Mapping, output: Mapping, params: Mapping) -> None:
    from grpo_dial.core.arm_names import display_names
    from grpo_dial.figures import save
    from grpo_dial.figures.aware import aware_figure as draw
    from grpo_dial.figures.aware import decomposition_figure

    steps, drift = read_table(input["steps"]), read_table(input["drift"])
    fig = draw(steps, drift, read_table(input["base"]), params["reference"], names=display_names(),
               runs=read_table(input["runs"]))  # fmt: skip
    save(fig, output["png"], output["pdf"])
    fig = decomposition_figure(read_table(input["decomposition"]), names=display_names())
    save(fig, output["decomposition_png"])


def aware_bridge(input: Mapping, output: Mapping, params: Mapping) -> None:
    """aware/bridge.csv: analysis/aware_bridge.length_bridge on every source of several samples
    of one model per problem: math_cot_100 (8 Qwen2.5-Math samples per MATH problem) and, when
    present, the GSM8K log (4 solutions per problem, scored against the reference)."""
    from grpo_dial.analysis.aware.bridge import bridge_sources

    responses = read_table(input["responses"])
    table = bridge_sources(responses, n_boot=int(params["n_boot"]), seed=int(params["seed"]))
    log.info("GRPO's 1/|o| push on real samples' lengths:\n%s", table.to_string(index=False))
    write_table(table, output["bridge"])


# --------------------------------------------------------------------------- the sweep


def aware_rates(input: Mapping, output: Mapping, params: Mapping) -> None:
    """aware_sweep/rates.csv: the SGD learning rate at which the closed form, carried through
    the base policy's tail kernel, moves the reference arm's contrast by SGD_TARGET over the run
    at the reference awareness level, and AdamW's rate from the kernel's L1 norm
    (analysis/aware_sweep.sgd_rate)."""
    from grpo_dial.analysis.aware.dose import sgd_rate
    from grpo_dial.core.dial import arm_from_fields

    dial = arm_from_fields(params["arm"]).dial
    table = sgd_rate(
        dial, read_table(input["base"]), read_table(input["kernel"]), params["train"],
        params["task"].get("options", {}), sgd_weights=params.get("sgd_weights", "all"),
    )  # fmt: skip
    log.info("SGD rate of the sweep:\n%s", table.to_string(index=False))
    write_table(table, output["rate"])


def aware_sweep_cell(input: Mapping, output: Mapping, params: Mapping) -> None:
    """aware_sweep/{optimizer}/{level}/{dial}.parquet: every seed of one arm trained at one
    awareness level with one optimizer, in this one process (backends.in_process(arm).train_cell);
    params frozen: the tail-frozen control (the arm's sampling, learning rate 0). SGD moves the
    weights aware_sweep/rates.csv was sized for (its sgd_weights), AdamW every weight."""
    from grpo_dial.analysis.aware.dose import LEVELS
    from grpo_dial.backends import in_process
    from grpo_dial.core.dial import arm_from_fields
    from grpo_dial.stages.policy import base_model_path

    _threads(params)
    train = dict(params["train"])
    rates = read_table(input["rate"]).iloc[0]
    train["lr"] = float(rates["lr"] if params["optimizer"] == "sgd" else rates["lr_adam"])
    train["optimizer"] = params["optimizer"]
    sgd = params["optimizer"] == "sgd" and not params.get("frozen", False)
    weights = str(rates.get("sgd_weights", "all")) if sgd else "all"
    compute, estimate = LEVELS[params["level"]]
    options = {**params["task"].get("options", {}), "compute_accuracy": compute,
               "estimate_accuracy": estimate}  # fmt: skip
    arm = arm_from_fields(params["arm"])
    table = in_process(arm).train_cell(
        base_model_path(input, params), {**params["task"], "options": options}, arm, train,
        params["seeds"], params["pool"], params["pool_seed"], params["device"],
        frozen=bool(params.get("frozen", False)), weights=weights,
    )  # fmt: skip
    write_table(
        table.assign(level=params["level"], optimizer=params["optimizer"], dial=params["dial"]),
        output["steps"],
    )


def aware_probe(input: Mapping, output: Mapping, params: Mapping) -> None:
    """aware_sweep/probe.csv, probe_fit.csv and probe_batches.csv (one row per batch): every
    arm's expected one-step SGD move of each mode's tail at the base policy, measured through the
    transformer over `batches` batches per level, beside the closed form through the kernel
    (analysis/aware/probe.py). The J are recomputed from rule aware_base's own sample and
    checked against aware/kernel.csv. The levels: params `levels` (every level of LEVELS by
    default)."""
    import numpy as np
    import torch

    from grpo_dial.analysis.aware.dose import LEVELS, dose_fit, kernel_of, level_awareness
    from grpo_dial.analysis.aware.kernel import mode_gradients
    from grpo_dial.analysis.aware.probe import (
        QUANTITIES,
        check_kernel,
        predictions,
        probe_table,
    )
    from grpo_dial.backends import in_process
    from grpo_dial.core.dial import arm_from_fields
    from grpo_dial.policy.masks import weight_masks
    from grpo_dial.policy.model import load_policy
    from grpo_dial.stages.policy import base_model_path

    _threads(params)
    model, tokenizer = load_policy(base_model_path(input, params), device=params["device"],
                                   dtype="float32")  # fmt: skip
    j_wrong, j_correct, _ = mode_gradients(model, tokenizer,
                                           _base_sample(model, tokenizer, params)[0],
                                           rows=int(params.get("kernel_rows", 512)))  # fmt: skip
    kernels, base = read_table(input["kernel"]), read_table(input["base"])
    check_kernel(j_wrong, j_correct, kernel_of(kernels, "all"))
    weights = [w for w in dict.fromkeys(("all", params.get("sgd_weights", "all")))]
    also = {}  # the J of every other weights setting SGD may move, projected on the same batches
    for w in weights[1:]:
        mask = torch.cat([m.reshape(-1) for m in weight_masks(model, tokenizer, w)]).double()
        also[w] = (j_wrong * mask, j_correct * mask)
        check_kernel(*also[w], kernel_of(kernels, w))
    arms = {d: arm_from_fields(f) for d, f in params["arms"].items()}
    options = params["task"].get("options", {})
    train, frames = dict(params["train"]), []
    levels = {k: v for k, v in LEVELS.items() if k in params.get("levels", LEVELS)}
    for level, (compute, estimate) in levels.items():
        task = _task({**params["task"], "options": {**options, "compute_accuracy": compute,
                                                     "estimate_accuracy": estimate}})  # fmt: skip
        problems = task.problems("train", params["pool"], params["pool_seed"])
        heldout = task.problems("heldout", 1, params["pool_seed"])
        for d, arm in arms.items():
            trainer = in_process(arm)
            config = trainer.cell_config(train, arm, params["pool"], params["pool_seed"],
                                         int(params["seed"]), params["device"])  # fmt: skip
            rows = trainer.probe_batches(model, tokenizer, task, problems, heldout, arm.dial,
                                         config, int(params["batches"]), j_wrong, j_correct,
                                         also)  # fmt: skip
            frames.append(rows.assign(level=level, a=level_awareness(level)[1], dial=d))
            log.info("probe %s %s: contrast %.3g +- %.2g", level, d, rows["contrast"].mean(),
                     rows["contrast"].std() / np.sqrt(len(rows)))  # fmt: skip
    batches = pd.concat(frames, ignore_index=True)
    tables, fits = [], []
    for w in weights:  # one table and fit per weights setting, each through its own kernel
        pred = predictions({d: a.dial for d, a in arms.items()}, base, kernel_of(kernels, w),
                           levels, options, train)  # fmt: skip
        own = batches if w == "all" else batches.drop(columns=list(QUANTITIES)).rename(
            columns={f"{q}_{w}": q for q in QUANTITIES})  # fmt: skip
        t = probe_table(own, pred, params["reference"], train.get("grad_clip"))
        tables.append(t.assign(weights=w))
        fits.append(dose_fit(t).assign(weights=w))
    table, fit = pd.concat(tables, ignore_index=True), pd.concat(fits, ignore_index=True)
    log.info("one-step probe:\n%s", table.to_string(index=False, float_format=lambda x: f"{x:.3g}"))
    write_table(batches, output["batches"])
    write_table(table, output["probe"])
    write_table(fit, output["fit"])


def aware_dose(input: Mapping, output: Mapping, params: Mapping) -> None:
    """aware_sweep/runs.csv (per seed), aware_sweep/dose.csv (per optimizer, level, arm and
    quantity, with predictions and power), aware_sweep/paired.csv and ratios.csv (arms paired
    by seed, ratios to the reference arm) and aware_sweep/truncation.csv; the tail-frozen
    control's cell (input frozen, when planned) as arm FROZEN, trained with the reference arm's
    dial; aware_sweep/tail_shape.csv (the wrong mode's stall read against the base tail's shape
    and the runs' end state, from input responses); summary.md with the one-step probe's and the
    tail-shape tables after the dose's (input probe, when given); input later (rule
    aware_later_probe's table, when planned) fills tail_shape.csv's later-state columns and adds
    its own section."""
    from grpo_dial.analysis.aware.dose import (
        FROZEN,
        adam_first_order,
        dose_fit,
        dose_table,
        sweep_runs,
    )
    from grpo_dial.analysis.aware.dose_report import dose_markdown, probe_markdown, rate_notes
    from grpo_dial.analysis.aware.later import later_markdown
    from grpo_dial.analysis.aware.paired import paired_table, ratio_table
    from grpo_dial.analysis.aware.seeds import truncation_table
    from grpo_dial.analysis.aware.tail_shape import mode_tails, shape_markdown, shape_table

    paths = [*input["cells"], *([input["frozen"]] if "frozen" in input.keys() else [])]
    cells = pd.concat([read_table(p) for p in paths], ignore_index=True)
    rates = read_table(input["rate"]).iloc[0]
    arms = {**params["arms"], FROZEN: params["arms"][params["reference"]]}
    runs = sweep_runs(
        cells, read_table(input["base"]), read_table(input["kernel"]), float(rates["lr"]),
        arms, {**params["train"], "lr": float(rates["lr_adam"])},
        params["task"].get("options", {}), params["window_fraction"],
        sgd_weights=str(rates.get("sgd_weights", "all")),
    )  # fmt: skip
    if "probe_batches" in input.keys():
        batches = read_table(input["probe_batches"])
        if {"adam_wrong", "adam_correct"} <= set(batches.columns):
            runs = adam_first_order(runs, batches, read_table(input["base"]))
        else:
            log.warning("aware_sweep/probe_batches.csv has no adam_* columns (a probe run before "
                        "they were drawn): no first-order Adam prediction; rerun aware_probe")
    dose = dose_table(runs)
    log.info("dose-response:\n%s", dose.to_string(index=False, float_format=lambda x: f"{x:.3g}"))
    write_table(runs, output["runs"])
    write_table(dose, output["dose"])
    fit = dose_fit(dose)
    write_table(fit, output["fit"])
    paired = paired_table(runs, params["reference"])
    ratios = ratio_table(runs, params["reference"])
    for name, table in (("paired", paired), ("ratios", ratios)):
        if name in output.keys():
            write_table(table, output[name])
    shape_text = ""
    if "tail_shape" in output.keys():
        base = read_table(input["base"])
        tails = mode_tails(read_table(input["responses"]), float(base["core"].iloc[0]))
        later = read_table(input["later"]) if "later" in input.keys() else None
        shape = shape_table(runs, paired, tails, base, read_table(input["kernel"]),
                            params["arms"], params["train"], params["task"].get("options", {}),
                            float(rates["lr"]), str(rates.get("sgd_weights", "all")),
                            later)  # fmt: skip
        write_table(shape, output["tail_shape"])
        shape_text = shape_markdown(tails, shape)
        if later is not None:
            shape_text = f"{shape_text}\n{later_markdown(later)}"
    write_table(truncation_table(runs, by=("optimizer", "level", "dial")), output["truncation"])
    if "summary" in output.keys():
        seeds = sorted(set(runs["seed"]))
        source = (f"aware_sweep/dose.csv and fit.csv, seeds {seeds[0]}-{seeds[-1]}, "
                  f"{int(params['train']['steps'])} steps")  # fmt: skip
        text = dose_markdown(dose, fit, source, rate_notes(rates), paired, ratios)
        if "probe" in input.keys():
            probe = probe_markdown(read_table(input["probe"]), read_table(input["probe_fit"]))
            text = f"{text}\n{probe}"
        if shape_text:
            text = f"{text}\n{shape_text}"
        with open(output["summary"], "w") as f:
            f.write(text)


def aware_dose_figure(input: Mapping, output: Mapping, params: Mapping) -> None:
    from grpo_dial.analysis.aware.grid import FROZEN
    from grpo_dial.core.arm_names import display_names
    from grpo_dial.figures import save
    from grpo_dial.figures.aware import dose_figure

    fig = dose_figure(read_table(input["dose"]), read_table(input["fit"]), names=display_names(),
                      control=FROZEN)  # fmt: skip
    save(fig, output["png"], output["pdf"])

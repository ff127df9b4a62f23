"""Rule file length_bias.smk: the length-bias simulation, the length pressure of logged runs,
and their figures."""

from __future__ import annotations

import logging
from collections.abc import Mapping

from grpo_dial.tables import read_table, write_table

log = logging.getLogger("grpo_dial")


def length_bias(input: Mapping, output: Mapping, params: Mapping) -> None:
    """The length-bias simulation on one pass-rate table: steps, prompts, summary, fit, curve."""
    from grpo_dial.analysis.length_bias import summary as lbs
    from grpo_dial.analysis.length_bias import tail as lb
    from grpo_dial.passrates.tables import read_passrates

    keys = [k for k in params if k not in ("awareness_grid", "threads")]
    config = lb.LengthBiasConfig(
        **{k: tuple(v) if isinstance(v, list) else v for k, v in params.items() if k in keys}
    )
    pool = read_passrates(input["table"])["p_hat"].to_numpy(dtype=float)
    steps, prompts = lb.simulate_length_bias(pool, config)
    summary, fit = lbs.summarize(steps), lbs.fit(steps)
    log.info("length-bias summary:\n%s", summary.to_string(index=False))
    log.info("closed-form fit:\n%s", fit.to_string(index=False))
    write_table(steps, output["steps"])
    write_table(prompts, output["prompts"])
    write_table(summary, output["summary"])
    write_table(fit, output["fit"])
    write_table(
        lb.closed_form_curve(pool, config, tuple(params["awareness_grid"])), output["curve"]
    )


def length_bias_figure(input: Mapping, output: Mapping, params: Mapping) -> None:
    """Tails over steps, measured against predicted drift, drift against awareness, ratios."""
    from grpo_dial.core.arm_names import display_names
    from grpo_dial.figures import save
    from grpo_dial.figures.length_bias import length_bias_figure as draw

    tables = (read_table(input[k]) for k in ("steps", "summary", "fit", "curve"))
    fig = draw(*tables, names=display_names())
    save(fig, output["figure_png"], output.get("figure_pdf"))


def _within_incorrect(path: str) -> float:
    terms = read_table(path)
    row = terms[(terms["quantity"] == "within_incorrect") & (terms["kind"] == "term")]
    return float(row["value"].iloc[0]) if len(row) else float("nan")


def length_pressure(input: Mapping, output: Mapping, params: Mapping) -> None:
    """Length pressure of every own run: per step (steps.csv), per dial with intervals over
    seeds (summary.csv) and whether it predicts the wrong-answer inflation (prediction.csv)."""
    import pandas as pd

    from grpo_dial.analysis.length_bias import pressure as lp
    from grpo_dial.core.dial import Dial

    frames, per_run = [], []
    run_steps = input.get("steps") or [None] * len(input["responses"])
    for path, steps_path, (dial, seed) in zip(
        input["responses"], run_steps, params["runs"], strict=True
    ):
        arm = Dial(**params["dials"][dial])  # the fields read_arm resolved at DAG build
        lam = arm.lambda_value
        if arm.lambda_learnable and steps_path is not None:  # the lambda each step weighed with
            logged = read_table(steps_path)
            lam = logged.set_index("step")["lambda"]
        steps = lp.step_pressure(
            read_table(path), arm.length_norm, arm.max_length, lam, arm.lambda_r, arm.bnpo_rows
        )
        frames.append(steps.assign(dial=dial, seed=int(seed)))
        per_run.append(
            {
                "dial": dial,
                "seed": int(seed),
                "normalizer": arm.length_norm,
                **lp.run_summary(steps, params["window_fraction"]),
            }
        )
    runs = pd.DataFrame(per_run)
    if input.get("terms"):  # the decomposition's within-incorrect term: the inflation measure
        runs["within_incorrect"] = [_within_incorrect(path) for path in input["terms"]]
    column = "within_incorrect" if "within_incorrect" in runs else "wrong_length_change"
    prediction = pd.DataFrame([lp.predicts_inflation(runs, column)])
    log.info("length pressure per run:\n%s", runs.to_string(index=False))
    log.info("does pressure predict inflation?\n%s", prediction.to_string(index=False))
    write_table(pd.concat(frames, ignore_index=True), output["steps"])
    write_table(lp.dial_summary(runs), output["summary"])
    write_table(runs, output["runs"])
    write_table(prediction, output["prediction"])


def length_pressure_external(input: Mapping, output: Mapping, params: Mapping) -> None:
    """An imported run's length pressure per step under every normalizer, its own marked."""
    import pandas as pd

    from grpo_dial.analysis.length_bias import pressure as lp

    responses, source = lp.with_advantages(read_table(input["responses"]))
    if source != "logged":
        log.warning("%s: %s", params["name"], source)
    frames = [lp.step_pressure(responses, norm) for norm in lp.IMPORTED]
    out = pd.concat(frames, ignore_index=True)
    out["used"] = out["normalizer"] == params["normalizer"]
    out["advantage_source"] = source
    write_table(out, output["steps"])


def length_pressure_figure(input: Mapping, output: Mapping, params: Mapping) -> None:
    """Pressure per step by dial, and pressure against wrong-answer inflation per run."""
    from grpo_dial.core.arm_names import display_names
    from grpo_dial.figures import save
    from grpo_dial.figures.length_bias import length_pressure_figure as draw

    tables = (read_table(input[k]) for k in ("steps", "runs", "prediction"))
    fig = draw(*tables, names=display_names())
    save(fig, output["figure_png"], output.get("figure_pdf"))

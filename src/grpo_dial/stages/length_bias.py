"""Rule file length_bias.smk: the length-bias simulation, the length pressure of logged runs,
and their figures."""

from __future__ import annotations

import logging
from collections.abc import Mapping

from grpo_dial.tables import read_table, write_table

log = logging.getLogger("grpo_dial")


def length_bias(input: Mapping, output: Mapping, params: Mapping) -> None:
    """The length-bias simulation on one pass-rate table: steps, prompts, summary, fit, curve."""
    from grpo_dial.analysis import length_bias as lb
    from grpo_dial.analysis import length_bias_summary as lbs
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
    from grpo_dial.figures import save
    from grpo_dial.figures.length_bias import length_bias_figure as draw

    fig = draw(*(read_table(input[k]) for k in ("steps", "summary", "fit", "curve")))
    save(fig, output["figure_png"], output.get("figure_pdf"))

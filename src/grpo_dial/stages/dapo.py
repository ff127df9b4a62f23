"""Rule file dapo.smk: DAPO's logged all-correct curve against a pass-rate prior."""

from __future__ import annotations

import logging
from collections.abc import Mapping

from grpo_dial.tables import read_table, write_table

log = logging.getLogger("grpo_dial")


def dapo_consistency(input: Mapping, output: Mapping, params: Mapping) -> None:
    """One-timescale fit of E_p[p_T^32] to DAPO's logged all-correct fraction."""
    from grpo_dial.analysis.dapo import fit_dapo, read_dapo_curve
    from grpo_dial.passrates.tables import read_passrates

    curve = read_dapo_curve(input["curve"])
    p = read_passrates(input["table"])["p_hat"].to_numpy(dtype=float)
    summary, fitted = fit_dapo(
        curve, p, eval_samples=params["eval_samples"], n_boot=params["n_boot"], seed=params["seed"]
    )
    log.info("DAPO consistency:\n%s", summary.to_string(index=False))
    write_table(summary, output["summary"])
    write_table(fitted, output["curve"])


def dapo_figure(input: Mapping, output: Mapping, params: Mapping) -> None:
    """The DAPO consistency fit."""
    from grpo_dial.figures import save_outputs
    from grpo_dial.figures.dapo import dapo_figure as draw

    save_outputs(draw(read_table(input["curve"]), read_table(input["summary"])), output, "figure")

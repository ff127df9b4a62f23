"""Rule file difficulty.smk: every difficulty table of one pass-rate table."""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from pathlib import Path

from grpo_dial.tables import read_table, write_table

log = logging.getLogger("grpo_dial")


def difficulty_analysis(input: Mapping, output: Mapping, params: Mapping) -> None:
    """Every difficulty table of one pass-rate table."""
    from grpo_dial.analysis import difficulty as d
    from grpo_dial.passrates.tables import read_passrates

    name = Path(input["table"]).stem
    table = read_passrates(input["table"])
    allocation = params["allocation"]
    started = time.perf_counter()
    write_table(d.histogram(table, name, bins=params["histogram_bins"]), output["histogram"])
    write_table(d.mass_shares(table, name), output["mass_shares"])
    write_table(
        d.silent_fractions(table, name, group_sizes=tuple(params["group_sizes"])),
        output["silent_fractions"],
    )
    write_table(
        d.recommended_group_size(table, name, fidelity=params["fidelity"]),
        output["recommended_g"],
    )
    totals, bands = d.budget_allocation(
        table,
        name,
        per_prompt_budget=allocation["per_prompt_budget"],
        signal=allocation["signal"],
        g_min=allocation["g_min"],
        g_max=allocation["g_max"],
    )
    write_table(totals, output["allocation"])
    write_table(bands, output["allocation_bands"])
    summary = d.summary(table, name)
    write_table(summary, output["summary"])
    log.info(
        "%s: %d prompts in %.2f s\n%s",
        name,
        len(table),
        time.perf_counter() - started,
        summary.to_string(index=False),
    )


def difficulty_figure(input: Mapping, output: Mapping, params: Mapping) -> None:
    """Histogram, mass shares and silent fractions of one pass-rate table."""
    from grpo_dial.core.arm_names import display_names
    from grpo_dial.figures import save_outputs
    from grpo_dial.figures.difficulty import difficulty_figure as draw

    fig = draw(
        read_table(input["histogram"]),
        read_table(input["mass_shares"]),
        read_table(input["silent_fractions"]),
        names=display_names(),
    )
    save_outputs(fig, output, "figure")

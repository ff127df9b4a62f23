"""Rule file theory.smk: the closed-form tables and the Monte-Carlo identity check."""

from __future__ import annotations

import logging
from collections.abc import Mapping

import numpy as np

from grpo_dial.tables import write_table

log = logging.getLogger("grpo_dial")


def theory_tables(input: Mapping, output: Mapping, params: Mapping) -> None:
    """Group-size table, (p, G) grid, difficulty weights, G for a silent-rate target."""
    from grpo_dial.analysis import theory_tables as tt

    p_grid = np.linspace(0, 1, params["p_grid_points"] + 2)[1:-1]
    table = tt.group_size_table(params["pass_rates"], params["fidelities"])
    log.info("group-size table:\n%s", table.to_string(index=False))
    write_table(table, output["group_size"])
    write_table(tt.fidelity_grid(p_grid, params["group_sizes"]), output["grid"])
    write_table(tt.difficulty_weight_curve(p_grid), output["weights"])
    write_table(
        tt.group_size_for_silent_table(p_grid, params["silent_deltas"]),
        output["silent_group_size"],
    )


def identity_check(input: Mapping, output: Mapping, params: Mapping) -> None:
    """Monte-Carlo identity curve g(k) and residuals on random score vectors."""
    from grpo_dial.analysis.identity import identity_curve, identity_residuals

    curve = identity_curve(
        group_size=params["group_size"],
        baselines=tuple(params["baselines"]),
        n_groups=params["n_groups"],
        seed=params["seed"],
    )
    residuals = identity_residuals(seed=params["seed"])
    log.info("largest identity residual: %.3g", residuals["max_abs_residual"].max())
    write_table(curve, output["curve"])
    write_table(residuals, output["residuals"])

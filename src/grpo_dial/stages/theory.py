"""Rule file theory.smk: the closed-form tables, the Monte-Carlo identity check, the
non-degenerate-group bias table and the engines' estimators on one dial."""

from __future__ import annotations

import logging
from collections.abc import Mapping

import numpy as np

from grpo_dial.tables import read_table, write_table

log = logging.getLogger("grpo_dial")


def theory_tables(input: Mapping, output: Mapping, params: Mapping) -> None:
    """Group-size table, (p, G) grid, difficulty weights, G for a silent-rate target."""
    from grpo_dial.analysis.theory import tables as tt

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
    from grpo_dial.analysis.theory.identity import identity_curve, identity_residuals

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


def group_bias(input: Mapping, output: Mapping, params: Mapping) -> None:
    """Non-degenerate-group baseline bias and HA-DW's correction per (p, G), with its MC check."""
    from grpo_dial.analysis.theory.tables import group_bias_table

    table = group_bias_table(
        params["pass_rates"],
        params["group_sizes"],
        anchor=params["anchor"],
        scale=params["scale"],
        n_groups=params["n_groups"],
        seed=params["seed"],
    )
    z = []
    for name in ("baseline", "adv_correct", "hadw_adv_correct"):
        se = table[f"mc_{name}_se"].where(table[f"mc_{name}_se"] > 0)
        z.append(((table[f"mc_{name}"] - table[name]) / se).abs().max())
    log.info("group-bias table:\n%s", table.iloc[:, :13].to_string(index=False))
    # zero-variance rows (G = 2: p_hat is always 1/2) and unanimous p have no z, so may all columns
    worst = max((v for v in z if np.isfinite(v)), default=float("nan"))
    log.info("largest Monte-Carlo deviation: %.2f standard errors", worst)
    write_table(table, output["table"])


def estimator_tables(input: Mapping, output: Mapping, params: Mapping) -> None:
    """Every engine estimator's gradient mass per (p, G) and the same-operation identity table."""
    from grpo_dial.analysis.theory.estimators import (
        estimator_identity_table,
        estimator_mass_table,
    )

    p_grid = np.linspace(0, 1, params["p_grid_points"] + 2)[1:-1]
    write_table(estimator_mass_table(p_grid, params["group_sizes"]), output["mass"])
    identity = estimator_identity_table(params["identity_batches"], params["seed"])
    log.info("same-operation identities:\n%s", identity.drop(columns="dial").to_string(index=False))
    wrong = identity[identity["same_operation"] != identity["predicted_same"]]
    if len(wrong):
        log.warning("identity differs from its prediction for: %s", ", ".join(wrong["estimator"]))
    write_table(identity, output["identity"])


def theory_figures(input: Mapping, output: Mapping, params: Mapping) -> None:
    """Identity, fidelity, difficulty-weight, silent-rate and estimator-mass figures from the
    theory tables."""
    from grpo_dial.core.arm_names import display_names
    from grpo_dial.figures import save_outputs
    from grpo_dial.figures import theory as f

    grid = read_table(input["grid"])
    save_outputs(f.identity_figure(read_table(input["identity"])), output, "identity")
    save_outputs(f.fidelity_figure(grid, params["pass_rates"]), output, "fidelity")
    weights = f.difficulty_weight_figure(read_table(input["weights"]), names=display_names())
    save_outputs(weights, output, "difficulty_weight")
    save_outputs(f.silent_rate_figure(grid, params["pass_rates"]), output, "silent_rate")
    mass = f.estimator_mass_figure(read_table(input["estimator_mass"]), names=display_names())
    save_outputs(mass, output, "estimator_mass")

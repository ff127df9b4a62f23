"""Rule file figures.smk: the theory, difficulty, simulation and DAPO figures, drawn from their
tables.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from grpo_dial.tables import read_table

log = logging.getLogger("grpo_dial")


def _save(fig, output: Mapping, name: str) -> None:
    from grpo_dial.figures import save

    save(fig, output[f"{name}_png"], output.get(f"{name}_pdf"))


def theory_figures(input: Mapping, output: Mapping, params: Mapping) -> None:
    """Identity, fidelity, difficulty-weight, silent-rate and estimator-mass figures from the
    theory tables."""
    from grpo_dial.core.arm_names import ARM_NAMES
    from grpo_dial.figures import theory as f

    grid = read_table(input["grid"])
    _save(f.identity_figure(read_table(input["identity"])), output, "identity")
    _save(f.fidelity_figure(grid, params["pass_rates"]), output, "fidelity")
    weights = f.difficulty_weight_figure(read_table(input["weights"]), names=ARM_NAMES)
    _save(weights, output, "difficulty_weight")
    _save(f.silent_rate_figure(grid, params["pass_rates"]), output, "silent_rate")
    mass = f.estimator_mass_figure(read_table(input["estimator_mass"]), names=ARM_NAMES)
    _save(mass, output, "estimator_mass")


def difficulty_figure(input: Mapping, output: Mapping, params: Mapping) -> None:
    """Histogram, mass shares and silent fractions of one pass-rate table."""
    from grpo_dial.core.arm_names import ARM_NAMES
    from grpo_dial.figures.difficulty import difficulty_figure as draw

    fig = draw(
        read_table(input["histogram"]),
        read_table(input["mass_shares"]),
        read_table(input["silent_fractions"]),
        names=ARM_NAMES,
    )
    _save(fig, output, "figure")


def simulation_figure(input: Mapping, output: Mapping, params: Mapping) -> None:
    """The controlled run's panels."""
    from grpo_dial.core.arm_names import ARM_NAMES
    from grpo_dial.figures.simulation import simulation_figure as draw

    fig = draw(
        read_table(input["steps"]),
        read_table(input["prompts"]),
        read_table(input["summary"]),
        names=ARM_NAMES,
    )
    _save(fig, output, "figure")


def dapo_figure(input: Mapping, output: Mapping, params: Mapping) -> None:
    """The DAPO consistency fit."""
    from grpo_dial.figures.dapo import dapo_figure as draw

    _save(draw(read_table(input["curve"]), read_table(input["summary"])), output, "figure")

"""Rule file simulate.smk: the controlled Bernoulli-logit run."""

from __future__ import annotations

import logging
from collections.abc import Mapping

from grpo_dial.tables import read_table, write_table

log = logging.getLogger("grpo_dial")


def simulate(input: Mapping, output: Mapping, params: Mapping) -> None:
    """The controlled Bernoulli-logit run, every configured arm."""
    from grpo_dial.analysis.simulate.controlled import SimulationConfig
    from grpo_dial.analysis.simulate.controlled import simulate as run_simulation
    from grpo_dial.analysis.simulate.summary import summarize
    from grpo_dial.passrates.tables import read_passrates

    table = read_passrates(input["table"])
    config = SimulationConfig(
        n_prompts=params["n_prompts"],
        group_size=params["group_size"],
        steps=params["steps"],
        lr=params["lr"],
        seed=params["seed"],
        max_resample_rounds=params["max_resample_rounds"],
        arms=tuple(params["arms"]),
        interior_only=params["interior_only"],
        p_clip=params["p_clip"],
        progress=True,
    )
    steps, prompts = run_simulation(table["p_hat"].to_numpy(dtype=float), config)
    summary = summarize(steps, prompts)
    log.info("simulation summary:\n%s", summary.to_string(index=False))
    write_table(steps, output["steps"])
    write_table(prompts, output["prompts"])
    write_table(summary, output["summary"])


def simulation_figure(input: Mapping, output: Mapping, params: Mapping) -> None:
    """The controlled run's panels."""
    from grpo_dial.core.arm_names import display_names
    from grpo_dial.figures import save_outputs
    from grpo_dial.figures.simulate import simulation_figure as draw

    fig = draw(
        read_table(input["steps"]),
        read_table(input["prompts"]),
        read_table(input["summary"]),
        names=display_names(),
    )
    save_outputs(fig, output, "figure")

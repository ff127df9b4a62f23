"""Entry points of the workflow's rules: read inputs, call the pure modules, write tidy tables.

Each stage is `stage(input, output, params)` with plain mappings of names to paths and values, so
it runs the same from Snakemake (`run_rule`), from the CLI, or from a test. No stage holds logic
that a library module could hold.
"""

from __future__ import annotations

import logging
import sys
import time
import traceback
from collections.abc import Callable, Mapping
from pathlib import Path

import numpy as np
import pandas as pd

log = logging.getLogger("grpo_dial")

Stage = Callable[[Mapping[str, str], Mapping[str, str], Mapping], None]


def write_table(df: pd.DataFrame, path: str | Path) -> None:
    """Write a tidy table as CSV or parquet by the path's suffix (directories created)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.suffix == ".parquet":
        df.to_parquet(path, index=False)
    elif path.suffix == ".csv":
        df.to_csv(path, index=False)
    else:
        raise ValueError(
            f"unsupported table suffix {path.suffix!r} for {path}; use .csv or .parquet"
        )


def read_table(path: str | Path) -> pd.DataFrame:
    """Read a table written by `write_table`."""
    path = Path(path)
    if not path.exists():
        raise ValueError(f"table not found: {path}")
    return pd.read_parquet(path) if path.suffix == ".parquet" else pd.read_csv(path)


# --------------------------------------------------------------------------- pass rates


def passrates(input: Mapping, output: Mapping, params: Mapping) -> None:
    """Load one configured pass-rate source into the tidy schema."""
    from grpo_dial.passrates import load_passrates, write_passrates

    table, report = load_passrates(params["spec"])
    log.info("loaded %s: %s", params["spec"].get("kind"), report)
    write_passrates(table, output["table"])


# --------------------------------------------------------------------------- theory


def theory_tables(input: Mapping, output: Mapping, params: Mapping) -> None:
    """Group-size table, (p, G) grid, difficulty weights, G for a silent-rate target."""
    from grpo_dial import theory_tables as tt

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
    from grpo_dial.identity import identity_curve, identity_residuals

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


# --------------------------------------------------------------------------- difficulty


def difficulty_analysis(input: Mapping, output: Mapping, params: Mapping) -> None:
    """Every difficulty table of one pass-rate table."""
    from grpo_dial import difficulty as d
    from grpo_dial.passrates import read_passrates

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


# --------------------------------------------------------------------------- simulation


def simulate(input: Mapping, output: Mapping, params: Mapping) -> None:
    """The controlled Bernoulli-logit run, every configured arm."""
    from grpo_dial.passrates import read_passrates
    from grpo_dial.simulate import SimulationConfig, summarize
    from grpo_dial.simulate import simulate as run_simulation

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


# --------------------------------------------------------------------------- DAPO


def dapo_consistency(input: Mapping, output: Mapping, params: Mapping) -> None:
    """One-timescale fit of E_p[p_T^32] to DAPO's logged all-correct fraction."""
    from grpo_dial.dapo_fit import fit_dapo, read_dapo_curve
    from grpo_dial.passrates import read_passrates

    curve = read_dapo_curve(input["curve"])
    p = read_passrates(input["table"])["p_hat"].to_numpy(dtype=float)
    summary, fitted = fit_dapo(
        curve, p, eval_samples=params["eval_samples"], n_boot=params["n_boot"], seed=params["seed"]
    )
    log.info("DAPO consistency:\n%s", summary.to_string(index=False))
    write_table(summary, output["summary"])
    write_table(fitted, output["curve"])


# --------------------------------------------------------------------------- figures


def _save(fig, output: Mapping, name: str) -> None:
    from grpo_dial.figures import save

    save(fig, output[f"{name}_png"], output.get(f"{name}_pdf"))


def theory_figures(input: Mapping, output: Mapping, params: Mapping) -> None:
    """Identity, fidelity, difficulty-weight and silent-rate figures from the theory tables."""
    from grpo_dial.figures import theory as f

    grid = read_table(input["grid"])
    _save(f.identity_figure(read_table(input["identity"])), output, "identity")
    _save(f.fidelity_figure(grid, params["pass_rates"]), output, "fidelity")
    _save(f.difficulty_weight_figure(read_table(input["weights"])), output, "difficulty_weight")
    _save(f.silent_rate_figure(grid, params["pass_rates"]), output, "silent_rate")


def difficulty_figure(input: Mapping, output: Mapping, params: Mapping) -> None:
    """Histogram, mass shares and silent fractions of one pass-rate table."""
    from grpo_dial.figures.difficulty import difficulty_figure as draw

    fig = draw(
        read_table(input["histogram"]),
        read_table(input["mass_shares"]),
        read_table(input["silent_fractions"]),
    )
    _save(fig, output, "figure")


def simulation_figure(input: Mapping, output: Mapping, params: Mapping) -> None:
    """The controlled run's panels."""
    from grpo_dial.figures.simulation import simulation_figure as draw

    fig = draw(
        read_table(input["steps"]), read_table(input["prompts"]), read_table(input["summary"])
    )
    _save(fig, output, "figure")


def dapo_figure(input: Mapping, output: Mapping, params: Mapping) -> None:
    """The DAPO consistency fit."""
    from grpo_dial.figures.dapo import dapo_figure as draw

    _save(draw(read_table(input["curve"]), read_table(input["summary"])), output, "figure")


# --------------------------------------------------------------------------- running


def run_rule(stage: Stage, smk) -> None:
    """Run `stage` for a Snakemake job: progress and errors go to the rule's log file.

    A `ValueError` (bad config, path or data row) is logged as one line; anything else with its
    traceback. Either way the job fails and Snakemake removes its partial outputs.
    """
    log_path = Path(smk.log[0]) if smk.log else None
    handlers: list[logging.Handler] = [logging.StreamHandler(sys.stderr)]
    if log_path is not None:
        log_path.parent.mkdir(parents=True, exist_ok=True)
        handlers.append(logging.FileHandler(log_path, mode="w"))
    logging.basicConfig(
        level=logging.INFO,
        handlers=handlers,
        force=True,
        format="%(asctime)s %(levelname)s %(message)s",
    )
    try:
        params = dict(smk.params.items())
        params.setdefault("threads", smk.threads)
        stage(dict(smk.input.items()), dict(smk.output.items()), params)
    except ValueError as error:
        log.error("%s: %s", stage.__name__, error)
        sys.exit(1)
    except Exception:
        log.error("%s failed:\n%s", stage.__name__, traceback.format_exc())
        sys.exit(1)

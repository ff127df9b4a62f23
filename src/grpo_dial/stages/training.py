"""Rule file training.smk: each RL run's length decomposition by correctness, the runs'
summary table, and the training figures drawn from them.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence

import pandas as pd

from grpo_dial.tables import read_table, write_table

log = logging.getLogger("grpo_dial")


def as_list(value) -> list[str]:
    return [str(value)] if isinstance(value, str) else [str(v) for v in value]


def gather_runs(paths: Sequence[str], runs: Sequence[Sequence]) -> pd.DataFrame:
    """Concatenate one table per run with `dial` and `seed` columns in front."""
    frames = []
    for path, (dial, seed) in zip(paths, runs, strict=True):
        frame = read_table(path)
        frame.insert(0, "seed", int(seed))
        frame.insert(0, "dial", str(dial))
        frames.append(frame)
    return pd.concat(frames, ignore_index=True)


def decompose_length(input: Mapping, output: Mapping, params: Mapping) -> None:
    """The three-term split of one run's length change, with prompt-bootstrap intervals, and its
    per-step curves by correctness and by the base pass-rate band."""
    from grpo_dial.analysis.training import decompose as d
    from grpo_dial.core.bands import pass_rate_band
    from grpo_dial.passrates.tables import read_passrates

    responses = read_table(input["responses"])
    before, after = d.windows(responses["step"].unique(), fraction=params["window_fraction"])
    terms = d.decompose_with_intervals(
        responses, before, after, n_boot=params["n_boot"], seed=params["seed"]
    )
    total = terms.set_index("quantity").loc["total"]
    log.info("length change %.2f [%.2f, %.2f] characters", total["value"], total["lo"],
             total["hi"])  # fmt: skip
    table = read_passrates(input["passrates"])
    bands = dict(zip(table["prompt_id"], pass_rate_band(table["p_hat"].to_numpy()),
                     strict=True))  # fmt: skip
    write_table(terms, output["terms"])
    write_table(d.length_curves(responses, band_of=bands), output["curves"])


def training_summary(input: Mapping, output: Mapping, params: Mapping) -> None:
    """One row per dial and seed, and the gathered per-run tables the figures are drawn from."""
    from grpo_dial.analysis.training.runs import expected_silent_base, summarize_runs
    from grpo_dial.passrates.tables import read_passrates

    runs = params["runs"]
    table = read_passrates(input["passrates"])
    steps_frames = []
    for path, responses_path, (dial, seed) in zip(
        as_list(input["steps"]), as_list(input["responses"]), runs, strict=True
    ):
        steps = read_table(path)
        expected = expected_silent_base(read_table(responses_path), table)
        steps["expected_silent_base"] = steps["step"].map(expected)
        steps.insert(0, "seed", int(seed))
        steps.insert(0, "dial", str(dial))
        steps_frames.append(steps)
    steps = pd.concat(steps_frames, ignore_index=True)
    terms = gather_runs(as_list(input["terms"]), runs)
    curves = gather_runs(as_list(input["curves"]), runs)
    mass = gather_runs(as_list(input["mass"]), runs)
    evals = gather_runs(as_list(input["evals"]), runs)
    identity = gather_runs(as_list(input["identity"]), runs)
    summary = summarize_runs(steps, terms, mass, evals, params["prompts_per_step"],
                             params["group_size"])  # fmt: skip
    log.info("training summary:\n%s", summary.to_string(index=False))
    write_table(summary, output["summary"])
    for name, frame in (("steps", steps), ("terms", terms), ("curves", curves),
                        ("identity", identity), ("evals", evals)):  # fmt: skip
        write_table(frame, output[name])


def training_figures(input: Mapping, output: Mapping, params: Mapping) -> None:
    """Length curves, decomposition, accuracy against length, silent fraction, identity, and the
    estimators' per-step state when the rule asks for it."""
    from grpo_dial.core.arm_names import display_names
    from grpo_dial.figures import save
    from grpo_dial.figures import training as f

    steps, terms = read_table(input["steps"]), read_table(input["terms"])
    names = display_names()
    figures = {
        "length_curves": f.length_curves_figure(read_table(input["curves"]), names=names),
        "decomposition": f.decomposition_figure(terms, names=names),
        "accuracy_length": f.accuracy_length_figure(steps, names=names),
        "silent_training": f.silent_figure(steps, names=names),
        "identity_training": f.identity_figure(read_table(input["identity"]), names=names),
    }
    if "estimators_training_png" in output:  # only when some dial uses a logging estimator
        from grpo_dial.core.estimators import column_labels
        from grpo_dial.figures.estimators import estimator_state_figure

        panels = column_labels()  # every registered column, titled by its estimator
        figures["estimators_training"] = estimator_state_figure(steps, panels, names=names)
    for name, fig in figures.items():
        save(fig, output[f"{name}_png"], output[f"{name}_pdf"])


def window_sensitivity(input: Mapping, output: Mapping, params: Mapping) -> None:
    """decompose/windows.csv: every run's decomposition at each window fraction of
    `fractions` (analysis.training.windows), with `dial` and `seed` in front."""
    from grpo_dial.analysis.training.windows import window_sensitivity as sensitivity

    frames = []
    for path, (dial, seed) in zip(as_list(input["responses"]), params["runs"], strict=True):
        table = sensitivity(read_table(path), params["fractions"], n_boot=params["n_boot"],
                            seed=params["seed"])  # fmt: skip
        frames.append(table.assign(dial=str(dial), seed=int(seed)))
    table = pd.concat(frames, ignore_index=True)
    write_table(table[["dial", "seed", *table.columns[:-2]]], output["windows"])

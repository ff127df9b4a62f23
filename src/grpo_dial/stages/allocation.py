"""Rule file allocation.smk: adaptive against uniform group sizes, compared over seeds, and its
figure.
"""

from __future__ import annotations

from collections.abc import Mapping

import pandas as pd

from grpo_dial.stages.training import as_list, gather_runs
from grpo_dial.tables import read_table, write_table


def allocation_comparison(input: Mapping, output: Mapping, params: Mapping) -> None:
    """Adaptive against uniform group sizes: accuracy against samples spent, the comparison
    with intervals over seeds, and the samples by pass-rate band."""
    from grpo_dial.analysis import allocation as ac

    runs = params["runs"]
    steps = gather_runs(as_list(input["steps"]), runs)
    evals = gather_runs(as_list(input["evals"]), runs)
    allocation = gather_runs(as_list(input["allocation"]), runs)
    responses = gather_runs(as_list(input["responses"]), runs)[["dial", "seed", "k", "G"]]
    curves = ac.accuracy_curves(steps, evals)
    comparison = pd.concat(
        [
            ac.compare_arms(
                curves, steps, params["pairs"], mode, params["target"], responses=responses
            )
            for mode in ("sampled", "greedy")
            if mode in set(curves["mode"])
        ],
        ignore_index=True,
    ).drop_duplicates(["adaptive", "uniform", "metric"], ignore_index=True)
    write_table(curves, output["curves"])
    write_table(comparison, output["comparison"])
    write_table(ac.samples_by_band(allocation), output["by_band"])


def allocation_figure(input: Mapping, output: Mapping, params: Mapping) -> None:
    """The figure, from the seed intervals of the curves and the bands in pass-rate order."""
    from grpo_dial.analysis import allocation as ac
    from grpo_dial.figures import save
    from grpo_dial.figures.allocation import allocation_figure as draw

    intervals = ac.curve_intervals(read_table(input["curves"]))
    fig = draw(intervals, ac.ordered_bands(read_table(input["by_band"])), params["pairs"])
    save(fig, output["figure_png"], output["figure_pdf"])

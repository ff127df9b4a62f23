"""The run's front page, results/summary.md, generated from the result tables (never typed).

`summary_markdown(tables)` takes the tables that exist, keyed by their path under the results
directory (`difficulty/synthetic/summary.csv`), and writes one section of markdown tables per kind
of result, each naming the files it read; a section whose tables are absent is left out. The
sections that need no trained model come first (closed forms, seeded simulations, public data:
identical on any machine), then those of the trained policy (machine-dependent).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pandas as pd

from grpo_dial.analysis.markdown import pick, source
from grpo_dial.analysis.summary import sections as s
from grpo_dial.analysis.summary import training as tr

HEADER = [
    "# grpo-dial: summary of this run", "",
    "Generated from the result tables by the `summary` rule; under each table, the files it was "
    "read from (paths relative to this file). Closed forms, seeded simulations and the public "
    "tables come out identical on any machine; the trained policy's numbers (its pass rates, the "
    "RL runs and everything measured on them) depend on the machine's float rounding, which RL "
    "amplifies: compare those across machines by their intervals over seeds "
    "(docs/results.md, \"Across machines\").", "",
]  # fmt: skip

SECTIONS = (
    s.group_size, s.identity, s.difficulty, s.simulate, s.length_bias, s.dapo, s.real_lengths,
    tr.base_policy, tr.rl_runs, tr.identity_model, tr.length_pressure, tr.allocation,
)  # fmt: skip


def _estimators(tables: Mapping[str, pd.DataFrame]) -> list[str]:
    """Every engine estimator's mass and identities, the closed form of the non-degenerate-group
    bias, and the trained estimators' state."""
    body = s.estimator_theory(tables) + s.group_bias(tables) + tr.estimator_state(tables)
    return ["## Estimators", "", *body] if body else []


def _external(tables: Mapping[str, pd.DataFrame]) -> list[str]:
    lines = []
    for name, path, t in pick(tables, r"external/(?P<name>[^/]+)/summary\.csv"):
        pairs = ", ".join(f"{m} {v:.3g}" for m, v in t.set_index("metric")["value"].items())
        lines += [f"## Imported run {name}", "", pairs + ".", "", source(path), ""]
    return lines


def _aware(tables: Mapping[str, pd.DataFrame]) -> list[str]:
    """The aware-tail study (task `aware`): each dial's mode-contrast drift against the closed
    form, and the real-model bridge when it ran."""
    if "aware/drift.csv" not in tables:
        return []
    from grpo_dial.analysis.aware.section import summary_lines

    paths = [p for p in ("aware/drift.csv", "aware/bridge.csv") if p in tables]
    body = summary_lines(tables["aware/drift.csv"], tables.get("aware/bridge.csv"))
    return ["## The aware tail", "", *body, "", source(*paths), ""]


def summary_markdown(tables: Mapping[str, pd.DataFrame], front: Sequence[str] = ()) -> str:
    """Markdown with one section per kind of table present, in a fixed order; the `front` lines
    (the run's provenance), when given, come right under the title, before anything else."""
    lines = [*HEADER[:2], *((*front, "") if front else ()), *HEADER[2:]]
    for section in (*SECTIONS, _aware, _estimators, _external):
        lines += section(tables)
    return "\n".join(lines).rstrip() + "\n"


__all__ = ["SECTIONS", "summary_markdown"]

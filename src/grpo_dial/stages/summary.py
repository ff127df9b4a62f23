"""Rule `summary`: results/summary.md, every study's section generated from the result tables."""

from __future__ import annotations

import logging
from collections.abc import Mapping

from grpo_dial.stages.training import as_list
from grpo_dial.tables import read_table

log = logging.getLogger("grpo_dial")


def summary_markdown(input: Mapping, output: Mapping, params: Mapping) -> None:
    """results/summary.md: the run's key numbers in tables, generated from the result tables,
    each keyed by its path relative to the summary's folder (the results directory)."""
    import os

    from grpo_dial.analysis.summary.page import summary_markdown as write

    root = os.path.dirname(os.path.abspath(output["summary"]))
    paths = [path for _, value in input.items() for path in as_list(value)]
    tables = {
        os.path.relpath(os.path.abspath(path), root).replace(os.sep, "/"): read_table(path)
        for path in paths
    }
    text = write(tables)
    with open(output["summary"], "w") as handle:
        handle.write(text)
    log.info("summary:\n%s", text)

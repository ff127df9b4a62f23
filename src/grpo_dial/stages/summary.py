"""Rule `summary`: results/summary.md, every study's section generated from the result tables,
under the run's provenance (results/manifest.json, written by the same job)."""

from __future__ import annotations

import logging
from collections.abc import Mapping

from grpo_dial.stages.training import as_list
from grpo_dial.tables import read_table

log = logging.getLogger("grpo_dial")


def summary_markdown(input: Mapping, output: Mapping, params: Mapping) -> None:
    """results/summary.md: the run's key numbers in tables, generated from the result tables,
    each keyed by its path relative to the summary's folder (the results directory).

    With params `provenance` (dag.provenance.run_record) the job also writes the manifest
    (output `manifest`, else manifest.json beside the summary) and the summary's first lines,
    under its title, are the manifest's header_lines; without it the page has no such lines."""
    import os

    from grpo_dial.analysis.summary.page import summary_markdown as write

    root = os.path.dirname(os.path.abspath(output["summary"]))
    paths = [path for _, value in input.items() for path in as_list(value)]
    tables = {
        os.path.relpath(os.path.abspath(path), root).replace(os.sep, "/"): read_table(path)
        for path in paths
    }
    front: list[str] = []
    if "provenance" in params:
        from grpo_dial.dag.provenance import MANIFEST, header_lines
        from grpo_dial.stages.manifest import build_manifest, write_manifest

        manifest = build_manifest(params["provenance"])
        write_manifest(manifest, output.get("manifest") or os.path.join(root, MANIFEST))
        front = header_lines(manifest)
    text = write(tables, front)
    with open(output["summary"], "w") as handle:
        handle.write(text)
    log.info("summary:\n%s", text)

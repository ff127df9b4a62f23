"""Rule file passrates.smk: one configured pass-rate source into the tidy schema."""

from __future__ import annotations

import logging
from collections.abc import Mapping

log = logging.getLogger("grpo_dial")


def passrates(input: Mapping, output: Mapping, params: Mapping) -> None:
    """Load one configured pass-rate source into the tidy schema."""
    from grpo_dial.passrates.loaders import load_passrates
    from grpo_dial.passrates.tables import write_passrates

    spec = dict(params["spec"])
    if "source" in input:  # the table's file is the job's input (a local copy or a download)
        spec["path"] = input["source"]
    table, report = load_passrates(spec)
    log.info("loaded %s: %s", spec.get("kind"), report)
    write_passrates(table, output["table"])

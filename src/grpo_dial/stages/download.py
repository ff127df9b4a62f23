"""Rule file download.smk: one public data file fetched from its pinned origin."""

from __future__ import annotations

from collections.abc import Mapping


def download(input: Mapping, output: Mapping, params: Mapping) -> None:
    """Fetch params["url"] to output["file"], sha256-checked, written atomically; refused under
    `offline: true` (a target named on the command line still reaches this job)."""
    from grpo_dial.data.public import fetch

    if params.get("offline"):
        raise ValueError(
            f"offline: true: not downloading {params['url']} (put the file in data_mirror, "
            "or set offline: false)"
        )
    fetch(params["url"], output["file"], params["sha256"])

"""Rule file download.smk: one public data file fetched from its pinned origin."""

from __future__ import annotations

from collections.abc import Mapping


def download(input: Mapping, output: Mapping, params: Mapping) -> None:
    """Fetch params["url"] to output["file"], sha256-checked, written atomically."""
    from grpo_dial.data.public import fetch

    fetch(params["url"], output["file"], params["sha256"])

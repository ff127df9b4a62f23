"""Where a data set or model lives: a local path, an http(s) URL, or a Hugging Face hub id.

A hub id is `owner/name` (one slash, no scheme): "openai/gsm8k", "HuggingFaceH4/MATH-500". This is
the one copy of the rule; the model loader, the pass-rate and prompt readers and the workflow's
config checks (workflow/rules/common.smk) all ask it. Standard library only, so the workflow can
import it at parse time without pulling in torch, pandas or pyarrow.
"""

from __future__ import annotations

import re
from pathlib import Path

HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")  # owner/name, not a path
DATA_SUFFIXES = (".jsonl", ".json", ".parquet")  # local data files the readers accept
BIGMATH_HUB_IDS = ("SynthLabsAI/Big-Math-RL-Verified", "open-r1/Big-Math-RL-Verified-Processed")
HUB_DEFAULTS = {  # dataset -> (hub id, load_dataset config name or None)
    "gsm8k": ("openai/gsm8k", "main"),
    "math500": ("HuggingFaceH4/MATH-500", None),
    "bigmath": ("open-r1/Big-Math-RL-Verified-Processed", None),
}


def is_hub_id(text: str | Path) -> bool:
    """Whether `text` has the shape of a hub id (owner/name); says nothing about the hub itself."""
    return bool(HUB_ID.match(str(text)))


def is_url(text: str | Path) -> bool:
    return str(text).startswith(("http://", "https://"))


def is_remote(text: str | Path) -> bool:
    """A hub id or an http(s) URL: read through `datasets`, never from the local disk."""
    return is_hub_id(text) or is_url(text)


def has_data_suffix(text: str | Path) -> bool:
    """Names a .jsonl / .json / .parquet file: a local path even when shaped like owner/name."""
    return str(text).lower().endswith(DATA_SUFFIXES)

"""Where a data set or model lives: a local path, or a Hugging Face hub id named explicitly.

Nothing is fetched implicitly. A config reads the hub only where it says so: `hub: <owner/name>`
in a pass-rate table or a math source spec, `hub:<owner/name>` as a model's `base`. Every other
path is local, and a missing one is a one-line error naming the file (`missing_path`), with a hint
to write `hub: <id>` when the path has the shape of a hub id (`owner/name`, one slash, no scheme:
"openai/gsm8k"). `HF_HUB_OFFLINE` / `HF_DATASETS_OFFLINE` are honoured: the libraries then read
their cache only, and a miss says so (`hub_failure`). This is the one copy of these rules; the
model loader, the pass-rate and prompt readers and workflow/rules/common.smk all ask it. Standard
library only, so the workflow imports it at parse time without torch, pandas or pyarrow.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path

HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")  # owner/name, not a path
DATA_SUFFIXES = (".jsonl", ".json", ".parquet")  # local data files the readers accept
BIGMATH_HUB_IDS = ("SynthLabsAI/Big-Math-RL-Verified", "open-r1/Big-Math-RL-Verified-Processed")
HUB_PREFIX = "hub:"  # model.base: hub:<owner/name>
OFFLINE_VARIABLES = ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE")
HUB_DEFAULTS = {  # dataset -> (its usual hub id, load_dataset config name of that id or None)
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


def hub_offline() -> str | None:
    """The first offline variable set to a true value (1, true, yes, on), or None."""
    for name in OFFLINE_VARIABLES:
        if os.environ.get(name, "").strip().lower() in ("1", "true", "yes", "on"):
            return name
    return None


def missing_path(path: str | Path, what: str, hint: str | None = "hub: ") -> str:
    """The one-line message for a local path that does not exist. A path shaped like a hub id
    is told what to write to read the hub (`hint` + id: "hub: " in a spec, "base: hub:" for a
    model; None where the hub is never read, e.g. tokenizers)."""
    text = str(path)
    if hint and is_hub_id(text) and not has_data_suffix(text):  # not a file such as a/b.jsonl
        return (
            f"{what} not found: {text} (a local path; to read it from the Hugging Face hub, "
            f"write {hint}{text})"
        )
    if is_url(text):
        return f"{what} not found: {text} (URLs are not fetched; download it and give its path)"
    return f"{what} not found: {text}"


def local_path(path: str | Path, what: str) -> Path:
    """`path` when it exists locally; else the one-line ValueError of `missing_path`."""
    if not Path(path).exists():
        raise ValueError(missing_path(path, what))
    return Path(path)


def check_hub_id(hub: object, what: str) -> str:
    """A `hub:` value: an owner/name string (one-line ValueError otherwise)."""
    if not isinstance(hub, str) or not is_hub_id(hub):
        raise ValueError(f"{what}: hub must be a hub id owner/name, got {hub!r}")
    return hub


def hub_model_id(base: str) -> str | None:
    """The hub id of a `hub:<owner/name>` model base, or None for a local path."""
    return base[len(HUB_PREFIX) :].strip() if base.startswith(HUB_PREFIX) else None


def hub_failure(hub: str, error: BaseException) -> str:
    """One line for a failed hub read, saying when an offline variable limited it to the cache."""
    first = (str(error).strip().splitlines() or [type(error).__name__])[0]
    offline = hub_offline()
    where = f" ({offline} is set: only the local Hugging Face cache is read)" if offline else ""
    return f"could not load hub id {hub!r}{where}: {type(error).__name__}: {first}"


def base_model_path(input: Mapping, params: Mapping) -> str:
    """The base model a policy job loads: the directory it took as input (built or local), else
    the configured model (a hub id, which the job's input leaves empty)."""
    return str(input["model"]) if input.get("model") else str(params["model"])

"""One training arm from its config entry: `dials.<name>` -> (advantage.Dial, Allocation).

An entry is a dial (a preset plus any advantage.Dial field) and, beside it, how the arm spreads
its samples over prompts:

    grpo:          {preset: grpo}
    grpo_adaptive: {preset: grpo, group_size: adaptive, allocation: {g_max: 8}}

`group_size` (uniform | adaptive) is Allocation.scheme; `allocation` overrides the workflow's
`train.allocation` defaults key by key. Any other key is an error that lists the valid ones.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import fields, replace

from grpo_dial.core.advantage import Dial, dial_from_config
from grpo_dial.train.config import Allocation

DIAL_KEYS = ("preset", *(f.name for f in fields(Dial)))
ALLOCATION_KEYS = ("group_size", "allocation", "backend")  # the arm's non-dial keys
SETTING_KEYS = tuple(f.name for f in fields(Allocation) if f.name != "scheme")


def _settings(settings: Mapping | None, where: str) -> dict:
    """An allocation mapping checked against SETTING_KEYS."""
    settings = dict(settings or {})
    unknown = [k for k in settings if k not in SETTING_KEYS]
    if unknown:
        raise ValueError(
            f"unknown {where} key {unknown[0]!r}; valid keys: {', '.join(SETTING_KEYS)}"
        )
    return settings


def read_arm(
    spec: Mapping, defaults: Mapping | None = None, *, max_new_tokens: int | None = None
) -> tuple[Dial, Allocation]:
    """(Dial, Allocation) of one `dials.<name>` entry; `defaults` is `train.allocation`.

    A dial with Dr. GRPO's constant normalizer and no max_length divides by max_new_tokens (the
    generation limit, TRL's max_completion_length) when it is given."""
    if not isinstance(spec, Mapping):
        raise ValueError(f"a dial entry must be a mapping, got {type(spec).__name__}")
    valid = (*DIAL_KEYS, *ALLOCATION_KEYS)
    unknown = [k for k in spec if k not in valid]
    if unknown:
        raise ValueError(f"unknown dial key {unknown[0]!r}; valid keys: {', '.join(valid)}")
    dial = dial_from_config({k: v for k, v in spec.items() if k in DIAL_KEYS})
    if dial.length_norm == "constant" and dial.max_length is None and max_new_tokens is not None:
        dial = replace(dial, max_length=int(max_new_tokens))
    allocation = Allocation(
        scheme=spec.get("group_size", "uniform"),
        **{
            **_settings(defaults, "train.allocation"),
            **_settings(spec.get("allocation"), "dial allocation"),
        },
    )
    return dial, allocation

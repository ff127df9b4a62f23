"""How many responses each prompt of a batch gets: the `Allocation` of an arm (uniform group
size, or adaptive sizes split by the closed forms on running pass-rate estimates;
grpo_dial.train.allocation), each field defined once (default, range or choices, help).
Standard library only."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Literal

from grpo_dial.core.settings import Setting, check_settings, dataclass_settings, setting


@dataclass(frozen=True)
class Allocation:
    """How many responses each prompt of a batch gets (grpo_dial.train.allocation)."""

    scheme: Literal["uniform", "adaptive"] = setting(
        "uniform",
        "'uniform': every prompt gets group_size responses. 'adaptive': the budget is split by "
        "the closed forms on running pass-rate estimates (an arm's `group_size: adaptive`).",
        choices=("uniform", "adaptive"),
    )
    signal: Literal["grpo", "dr_grpo", "nonsilent"] = setting(
        "grpo",
        "What the split maximizes per prompt: 'grpo' E[sigma](p, G), 'dr_grpo' "
        "p(1-p)(1-1/G), 'nonsilent' 1 - p^G - (1-p)^G (the chance the group is not silent).",
        choices=("grpo", "dr_grpo", "nonsilent"),
    )
    g_min: int = setting(2, "Fewest responses of a sampled prompt.", kind=int, low=1)
    g_max: int = setting(32, "Most responses of one prompt (at least g_min).", kind=int, low=1)
    unanimous: Literal["skip", "minimum"] = setting(
        "minimum",
        "Prompts estimated at p = 0 or 1 (all evidence one-sided): 'skip' (not sampled, so the "
        "estimate never changes) or 'minimum' (g_min responses, so a change is noticed).",
        choices=("skip", "minimum"),
    )
    prior_strength: float = setting(
        8.0,
        "Pseudo-responses of the base pass-rate table in each prompt's running estimate "
        "(at most the table's n).",
        kind=float, low=0.0,
    )  # fmt: skip
    decay: float = setting(
        0.8,
        "Old counts are multiplied by this at each visit of the prompt (memory ~ 1/(1-decay) "
        "visits); 1 keeps everything.",
        kind=float, low=0.0, low_open=True, high=1.0,
    )  # fmt: skip

    def __post_init__(self) -> None:
        check_settings(self)
        if self.g_max < self.g_min:
            raise ValueError(f"g_max must be at least g_min = {self.g_min}, got {self.g_max!r}")


ALLOCATION_SETTINGS: Mapping[str, Setting] = MappingProxyType(dataclass_settings(Allocation))
SETTING_KEYS = tuple(name for name in ALLOCATION_SETTINGS if name != "scheme")


__all__ = ["ALLOCATION_SETTINGS", "SETTING_KEYS", "Allocation"]

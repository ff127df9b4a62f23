"""The estimator registry's machinery: every estimator beyond the group advantage is one
registered entry (the entries: core.estimators, which imports the engines' first, from
core.engine_estimators and core.engine_losses, so theirs apply first).

As in verl's `register_adv_est`: `@register_estimator(name, ...)` puts a function in one dict
(a duplicate name fails loudly, an unknown one lists the valid names). An entry owns everything
the pipeline knows of its estimator, so a new one is one entry in one of those modules:

- its Dial fields (`fields`: name -> core.settings.Setting; the Dial, the config schema's
  `dials` block and the docs read them) and any value it adds to a core field (`choices`, e.g.
  lambda-GRPO's length_norm 'lambda'); `check` refuses a combination of fields in one line;
- `active`: whether a dial uses it; `switch`: the field that switches it on (refusals name it);
- its kind and function:
    advantage: fn(adv, stats, dial, regroup, **needs) -> adv, applied in registration order
               after A_i = (r_i - mean_g) / (sigma_g + eps) ** std_power; stats is the
               batch's core.advantage.GroupStats (stats.rewards the rewards);
               regroup(cell) is that same formula over any finer grouping (N,) of the batch.
    weights:   fn(dial) -> (mask, group_ids=None, lam=None) -> token weights (B, T).
    ratio:     fn(dial) -> (log_ratio (B, T), mask (B, T) | None) -> the log importance ratio
               (B, T) the clipped surrogate uses (GSPO's per-sequence one).
- `needs`: the per-batch inputs the trainer gathers for it (grpo_dial.train.estimator);
- its steps-table columns and `log(dial, inputs, batch) -> {column: value}` (NaN for an arm
  that does not use it), so the training log and the estimators figure follow the registry;
- `backends`: the training engines that express it; any other refuses it by name (`why_not`);
- `preset`: the Dial fields of the recipe named `name`; `label`: its display name
  (core.arm_names, read by the summary and the figure stages).

No torch at import (the entries import it inside their functions), so the DAG build and the
dial's checks read the registry without it. Read it through core.estimators, which registers
every entry.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from grpo_dial.core.arm_names import add_arm_name, arm_name
from grpo_dial.core.settings import Setting

KINDS = ("advantage", "weights", "ratio")


@dataclass(frozen=True)
class Estimator:
    """One registered estimator: its function and what the rest of the pipeline reads of it."""

    name: str
    label: str  # its display name: core.arm_names' entry
    kind: str  # 'advantage', 'weights' or 'ratio'
    fields: Mapping[str, Setting]  # the Dial fields it owns
    active: Callable[[Any], bool]  # dial -> whether this dial uses it
    function: Callable
    switch: str  # the field that switches it on (named by a backend's refusal)
    choices: Mapping[str, tuple] = field(default_factory=dict)  # values added to core fields
    check: Callable[[Any], str | None] | None = None  # dial -> why its fields clash, or None
    needs: tuple[str, ...] = ()  # per-batch inputs the trainer gathers (train.estimator)
    columns: tuple[str, ...] = ()  # steps-table columns it logs (the estimators figure)
    log: Callable[..., Mapping[str, float]] | None = None  # (dial, inputs, batch) -> columns
    backends: tuple[str, ...] = ("own",)  # the training engines that express it
    why_not: str = ""  # why the others cannot (their refusal line)
    preset: Mapping[str, object] | None = None  # Dial fields of the recipe named `name`


ESTIMATORS: dict[str, Estimator] = {}


def register_estimator(
    name: str,
    *,
    label: str | None = None,
    kind: str,
    fields: Mapping[str, Setting],
    active: Callable[[Any], bool],
    switch: str | None = None,
    choices: Mapping[str, tuple] | None = None,
    check: Callable[[Any], str | None] | None = None,
    needs: tuple[str, ...] = (),
    columns: tuple[str, ...] = (),
    log: Callable[..., Mapping[str, float]] | None = None,
    backends: tuple[str, ...] = ("own",),
    why_not: str = "",
    preset: Mapping[str, object] | None = None,
) -> Callable[[Callable], Callable]:
    """Decorator: register `function` as estimator `name` (a name or field registered twice
    raises); `label`, its display name, goes to core.arm_names (None: the name that table has);
    `switch` defaults to its first field."""
    if kind not in KINDS:
        raise ValueError(f"estimator kind {kind!r} is not valid; choose one of {', '.join(KINDS)}")
    if columns and log is None:
        raise ValueError(f"estimator {name!r} logs columns {columns} but has no log function")

    def decorate(function: Callable) -> Callable:
        if name in ESTIMATORS:
            raise ValueError(f"estimator {name!r} is already registered")
        owned = {f: e.name for e in ESTIMATORS.values() for f in e.fields}
        if clash := [f for f in fields if f in owned]:
            raise ValueError(f"dial field {clash[0]!r} is already owned by {owned[clash[0]]!r}")
        if label is not None:
            add_arm_name(name, label)
        ESTIMATORS[name] = Estimator(
            name=name, label=arm_name(name), kind=kind, fields=dict(fields), active=active,
            function=function, switch=switch or next(iter(fields)), choices=dict(choices or {}),
            check=check, needs=tuple(needs), columns=tuple(columns), log=log,
            backends=tuple(backends), why_not=why_not,
            preset=None if preset is None else dict(preset),
        )  # fmt: skip
        return function

    return decorate


def unregister_estimator(name: str) -> None:
    """Remove estimator `name` (a test's toy, or a plugin withdrawn); unknown names raise."""
    get_estimator(name)
    del ESTIMATORS[name]


def get_estimator(name: str) -> Estimator:
    """The registered estimator `name`; an unknown name lists the valid ones."""
    if name not in ESTIMATORS:
        raise ValueError(f"unknown estimator {name!r}; valid: {', '.join(sorted(ESTIMATORS))}")
    return ESTIMATORS[name]


def active_estimators(dial: Any, kind: str | None = None) -> list[Estimator]:
    """The estimators `dial` uses, in registration order (the order their functions apply)."""
    return [e for e in ESTIMATORS.values() if (kind is None or e.kind == kind) and e.active(dial)]


def log_columns() -> tuple[str, ...]:
    """Every registered estimator's steps-table columns, in registration order."""
    return tuple(c for e in ESTIMATORS.values() for c in e.columns)


def logged_values(dial: Any, inputs: Mapping[str, object], batch: Any) -> dict[str, float]:
    """One step's value of every `log_columns` column: each active estimator's `log` on the
    inputs gathered for it (and `lambda`, the step's lambda), NaN for the others."""
    out = dict.fromkeys(log_columns(), math.nan)
    for est in active_estimators(dial):
        if est.log is not None:
            out.update({c: float(v) for c, v in est.log(dial, inputs, batch).items()})
    return out


def refusal(dial: Any, backend: str) -> tuple[str, str] | None:
    """(field, why) for the first active estimator `backend` cannot express, else None."""
    for est in active_estimators(dial):
        if backend not in est.backends:
            why = est.why_not or f"it has no {est.label}"
            return est.switch, f"{est.switch} = {getattr(dial, est.switch)!r}: {why}"
    return None

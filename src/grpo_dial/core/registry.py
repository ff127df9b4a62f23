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
- its kind and function. The advantage of response i is composed in one stated order:

      A_i = T_n( ... T_1( (r_i - b_i) / s_i ) ... )

  b_i its baseline, s_i its scale (two slots, each with at most one owner per dial) and T_1..T_n
  the dial's active 'advantage' transforms in registration order:
    baseline:  fn(stats, dial, **needs) -> (N,) r_i - b_i, the reward less its baseline (the
               slot returns the centred reward, so a baseline like RLOO's G/(G-1)(r_i - mean_g)
               keeps its own rounding). Unowned: the group mean, b_i = mean_g
               (core.engine_estimators.group_centred; a group of one under singleton 'reward':
               b_i = 0). stats is the batch's core.advantage.GroupStats (stats.rewards the
               rewards).
    scale:     fn(stats, dial, **needs) -> (N,) s_i > 0, what the centred reward is divided by.
               Unowned: s_i = (sigma_g + eps) ** std_power, 1 where that is 0
               (core.engine_estimators.group_scale; sigma = 1 for a group of one under
               singleton 'reward').
    advantage: fn(adv, stats, dial, regroup, **needs) -> adv, a transform of the composed A;
               regroup(cell) is (r_i - b_i) / s_i with this dial's own baseline and scale slots
               over any finer grouping (N,) of the batch (a cell of one is a group of one).
    weights:   fn(dial) -> (mask, group_ids=None, lam=None) -> token weights (B, T).
    ratio:     fn(dial) -> (log_ratio (B, T), mask (B, T) | None) -> the log importance ratio
               (B, T) the clipped surrogate uses (GSPO's per-sequence one).
  Two active entries of one slot are refused when the Dial is built (`slot_clash`, run by
  core.dial.Dial's check, so a config arm fails at DAG build), by both names and the slot. An
  entry owns a slot when its math is exactly that (the centred reward, or its divisor); a
  factor on top of the scale (GPG's B/M) or a whole-batch map (whitening) is a transform.
- `needs`: the per-batch inputs the trainer gathers for it (grpo_dial.train.estimator);
- its steps-table columns and `log(dial, inputs, batch) -> {column: value}` (NaN for an arm
  that does not use it), so the training log and the estimators figure follow the registry;
- `backends`: the training engines that express it; any other refuses it by name (`why_not`);
- `preset`: the Dial fields of the recipe named `name`; `label`: its display name (every
  figure and summary reads it through core.arm_names.display_names).

No torch at import (the entries import it inside their functions), so the DAG build and the
dial's checks read the registry without it. Read it through core.estimators, which registers
every entry.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from grpo_dial.core.settings import Setting

SLOTS = ("baseline", "scale")  # each owned by at most one active entry of a dial
KINDS = (*SLOTS, "advantage", "weights", "ratio")
ADVANTAGE_KINDS = (*SLOTS, "advantage")  # the kinds that make the advantage, in their order


@dataclass(frozen=True)
class Estimator:
    """One registered estimator: its function and what the rest of the pipeline reads of it."""

    name: str
    label: str  # its display name in every figure and summary (core.arm_names.display_names)
    kind: str  # one of KINDS: a slot ('baseline', 'scale'), 'advantage', 'weights', 'ratio'
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
    raises); `label`: its display name (None: its name);
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
        ESTIMATORS[name] = Estimator(
            name=name, label=label or name, kind=kind, fields=dict(fields), active=active,
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


def advantage_estimators(dial: Any) -> list[Estimator]:
    """The entries that make `dial`'s advantage, in the order they compose: its baseline
    owner, its scale owner, then its 'advantage' transforms in registration order."""
    return [e for kind in ADVANTAGE_KINDS for e in active_estimators(dial, kind)]


def slot_owner(dial: Any, slot: str) -> Estimator | None:
    """The active entry that owns `slot` ('baseline' or 'scale') for `dial`, None for the
    default (the group mean, the group's std factor); a clash raises as in `slot_clash`."""
    if slot not in SLOTS:
        raise ValueError(f"slot {slot!r} is not valid; choose one of {', '.join(SLOTS)}")
    if (why := slot_clash(dial, (slot,))) is not None:
        raise ValueError(why)
    owners = active_estimators(dial, slot)
    return owners[0] if owners else None


def slot_clash(dial: Any, slots: tuple[str, ...] = SLOTS) -> str | None:
    """Why `dial` is refused: two of its active entries claim one slot (named both), else None."""
    for slot in slots:
        owners = active_estimators(dial, slot)
        if len(owners) > 1:
            return (
                f"estimators {owners[0].name!r} and {owners[1].name!r} both claim the {slot} "
                f"slot; a dial has one {slot}"
            )
    return None


def log_columns() -> tuple[str, ...]:
    """Every registered estimator's steps-table columns, in registration order."""
    return tuple(c for e in ESTIMATORS.values() for c in e.columns)


def column_labels() -> dict[str, str]:
    """Every `log_columns` column -> the label of the estimator that logs it (the estimators
    figure's panel titles and the summary's quantities)."""
    return {c: e.label for e in ESTIMATORS.values() for c in e.columns}


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

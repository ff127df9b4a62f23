"""The dial: every choice a group-relative estimator makes, as one frozen value of fields.

GRPO, Dr. GRPO and DAPO differ in what they do with the group std (std_power, std_ddof, eps,
silent) and in how token losses are aggregated (length_norm); these core fields are declared
here as the Dial's dataclass fields (CORE_SETTINGS reads them). The essay's other fixes are
registered estimators (grpo_dial.core.estimators), each owning its own fields: lambda-GRPO's
learnable length preference (length_norm='lambda' and the lambda_* fields, arXiv 2510.06870),
Stratified GRPO's stratified advantage normalization (strata, strata_blend, arXiv 2510.06214)
and HA-DW's history-aware difficulty anchor (anchor*, arXiv 2601.08521). Each field is one
Setting (core.settings): the check here, the config schema's `dials` block and the docs read
that one definition.

Why the Dial is a dataclass with only the core fields declared: declared fields are what a type
checker sees (`dial.std_power: float`), and the core is fixed. A registered estimator's fields
are defined by its registry entry alone (core.registry: "a new estimator is one entry"), so the
Dial cannot declare them without a second definition per estimator that could drift from the
first; they are held beside the core fields and read through `__getattr__`, which a type
checker types as Any. A class generated from the registry at import (dataclasses.make_dataclass)
would declare them at run time only, which no type checker reads.

An arm is one `dials.<name>` entry resolved (`read_arm`): its Dial, its sample Allocation and
its training backend. The formulas are in grpo_dial.core.advantage; this module only holds and
checks the fields, plus the named presets. Unknown names raise and list the valid ones.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import FrozenInstanceError, asdict, dataclass, field
from types import MappingProxyType
from typing import Any, Literal, NamedTuple

from grpo_dial.core.allocation import SETTING_KEYS, Allocation
from grpo_dial.core.estimators import ADVANTAGE_KINDS, ESTIMATORS, slot_clash
from grpo_dial.core.settings import Setting, dataclass_settings, setting

BACKENDS = ("own", "trl")  # the training engines (grpo_dial.backends)


@dataclass(frozen=True, init=False, eq=False, repr=False)
class Dial:
    """Every choice GRPO, Dr. GRPO, DAPO and the registered estimators (lambda-GRPO, Stratified
    GRPO, HA-DW, ...) make about the group's rewards and the token losses, as independent
    fields: a frozen value. `Dial(**values)` checks each field once, by its Setting, then runs
    each active estimator's cross-field check; an unknown key raises and lists the valid ones.

    The core fields below are real dataclass fields, each defined once by `setting` (default,
    range or choices, help; CORE_SETTINGS reads them), so a type checker sees `dial.std_power`
    as a float. A registered estimator's fields (core.estimators) are not declared here: a new
    estimator stays one registered entry, and its fields are read through `__getattr__` (typed
    Any). They travel in `_registered` (name -> value, in registration order), a dataclass field
    too, so even `dataclasses.replace` keeps them; `dial.replace` is the checked way."""

    # The core of the dial: what GRPO, Dr. GRPO and DAPO do with the group std and with the
    # token losses. Every registered estimator adds its own settings after these.
    std_power: float = setting(
        1.0,
        "alpha in [0,1]: A = (r - mean) / (sigma + eps)**alpha. 1 = GRPO/DAPO (arXiv 2402.03300, "
        "2503.14476): equal weight per informative prompt, step ~ sigma. 0 = Dr. GRPO "
        "(2503.20783): no difficulty reweighting, step ~ sigma^2. Values between interpolate.",
        kind=float, low=0.0, high=1.0,
    )  # fmt: skip
    std_ddof: Literal[0, 1] = setting(
        0,
        "0 = population std, the paper's sigma = sqrt(k(G-k))/G. 1 = sample std (torch.std) as "
        "TRL, verl, OpenRLHF and oat use; larger by sqrt(G/(G-1)), so advantages shrink (x0.935 "
        "at G=8). Pick 1 to match a framework's numbers.",
        choices=(0, 1),
    )  # fmt: skip
    eps: float = setting(
        1e-6,
        "Added to sigma before the power; matters only for small sigma (silent groups give 0 "
        "anyway). TRL 1e-4, verl 1e-6 (default), oat 1e-8, OpenRLHF 1e-9. 0 for exact identities.",
        kind=float, low=0.0,
    )  # fmt: skip
    silent: Literal["keep", "drop"] = setting(
        "keep",
        "Groups whose rewards are all equal (sigma = 0, zero gradient). 'keep' (GRPO, Dr. GRPO, "
        "TRL): they stay and dilute the token/sequence normalizers. 'drop' (DAPO dynamic "
        "sampling): filter them out and refill the batch by sampling again.",
        choices=("keep", "drop"),
    )  # fmt: skip
    max_resample_rounds: int = setting(
        4,
        "With silent='drop', how many extra sampling rounds may refill dropped groups; bounds the "
        "sample cost. The paper's controlled DAPO arm resamples a silent group at most 4 times.",
        kind=int, low=0,
    )  # fmt: skip
    length_norm: str = setting(
        "sequence",
        "'sequence' (GRPO, TRL 'grpo'): mean over each response's tokens, then over responses; "
        "favours long wrong and short right answers. 'token' (DAPO, TRL 'dapo'/'bnpo'): batch sum "
        "/ total tokens. 'constant' (Dr. GRPO, TRL 'dr_grpo'): sum / (responses * max_length), "
        "no length bias. A registered estimator of kind 'weights' adds its own value (lambda-GRPO: "
        "'lambda').",
        choices=("sequence", "token", "constant"),
    )  # fmt: skip
    max_length: int | None = setting(
        None,
        "L_max for length_norm='constant': set it to the generation limit (TRL's "
        "max_completion_length). None uses the padded width of the mask, as verl does, which "
        "makes the normalizer depend on how the batch happened to be padded.",
        kind=int, low=1, nullable=True,
    )  # fmt: skip
    clip_low: float = setting(
        0.2,
        "PPO lower clip: the ratio is floored at 1 - clip_low for negative advantages (0.2 in "
        "PPO, GRPO, DAPO). Binds only when a batch is reused for more than one update.",
        kind=float, low=0.0, high=1.0, high_open=True,
    )  # fmt: skip
    clip_high: float = setting(
        0.2,
        "PPO upper clip: the ratio is capped at 1 + clip_high for positive advantages. 0.2 is "
        "symmetric PPO/GRPO; DAPO's clip-higher uses 0.28 so rare tokens can still gain "
        "probability (less entropy collapse).",
        kind=float, low=0.0,
    )  # fmt: skip
    _registered: Mapping[str, Any] = field(default_factory=dict, repr=False)

    def __init__(self, **values: Any) -> None:
        settings = dial_settings()
        values = {**values.pop("_registered", {}), **values}  # dataclasses.replace passes it
        unknown = [k for k in values if k not in settings]
        if unknown:
            raise ValueError(
                f"unknown dial key {unknown[0]!r}; valid keys: {', '.join(('preset', *settings))}"
            )
        checked = {
            name: spec.check(name, values.get(name, spec.default))
            for name, spec in settings.items()
        }
        for name in CORE_SETTINGS:
            object.__setattr__(self, name, checked.pop(name))
        object.__setattr__(self, "_registered", MappingProxyType(checked))
        for est in ESTIMATORS.values():
            if est.check is not None and (why := est.check(self)) is not None:
                raise ValueError(why)
        if (why := slot_clash(self)) is not None:  # two owners of one baseline or scale slot
            raise ValueError(why)

    def __getattr__(self, name: str) -> Any:
        """A registered estimator's field (only called when `name` is not a core field)."""
        if name.startswith("__") or name == "_registered":  # copy / pickle probes
            raise AttributeError(name)
        try:
            return self._registered[name]
        except KeyError:
            raise AttributeError(f"Dial has no field {name!r}") from None

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Dial) and self.as_dict() == other.as_dict()

    def __hash__(self) -> int:
        return hash(tuple(sorted(self.as_dict().items(), key=lambda item: item[0])))

    def __repr__(self) -> str:
        return f"Dial({', '.join(f'{k}={v!r}' for k, v in self.as_dict().items())})"

    def __reduce__(self) -> tuple:
        return (_dial_from_dict, (self.as_dict(),))

    def as_dict(self) -> dict[str, Any]:
        """The fields as plain values, in `dial_settings` order (what a job rebuilds it from)."""
        return {**{name: getattr(self, name) for name in CORE_SETTINGS}, **self._registered}

    def replace(self, **changes: Any) -> Dial:
        """A new Dial with `changes` (checked like any other)."""
        return Dial(**{**self.as_dict(), **changes})


def _frozen(self: Dial, name: str, value: object) -> None:
    raise FrozenInstanceError(f"a Dial is frozen; use dial.replace({name}=...)")


Dial.__setattr__ = _frozen  # type: ignore[method-assign]  # the dataclass's error, with the way out
CORE_SETTINGS: Mapping[str, Setting] = MappingProxyType(dataclass_settings(Dial))


def dial_settings() -> dict[str, Setting]:
    """Every Dial field and its Setting: the core's, then each registered estimator's own fields
    in registration order; a core field gains the choices an estimator adds to it."""
    out = dict(CORE_SETTINGS)
    for est in ESTIMATORS.values():
        for name, extra in est.choices.items():
            out[name] = out[name].with_choices(extra)
        out.update(est.fields)
    return out


def _dial_from_dict(values: dict) -> Dial:
    return Dial(**values)


def group_estimator(dial: Dial) -> Dial:
    """`dial` without its registered advantage estimators, slot owners included (each one's
    switch field back at its default): the plain group advantage the std identity speaks
    about."""
    settings = dial_settings()
    off = {
        est.switch: settings[est.switch].default
        for est in ESTIMATORS.values()
        if est.kind in ADVANTAGE_KINDS and est.active(dial)
    }
    return dial.replace(**off)


class _Presets(Mapping[str, "Dial"]):
    """Recipe name -> its Dial: GRPO, Dr. GRPO and DAPO, then the recipe of every registered
    estimator that names one (core.estimators), read live so a new estimator's recipe is here."""

    # Presets leave max_length None because L_max is a generation setting; set it for dr_grpo.
    BASE: Mapping[str, Mapping[str, object]] = MappingProxyType({
        "grpo": {},
        "dr_grpo": {"std_power": 0.0, "length_norm": "constant"},
        "dapo": {"silent": "drop", "length_norm": "token", "clip_high": 0.28},
        # HA-DW as the authors released it (a second recipe of the registered hadw_grpo):
        # the anchor is the mean of the last 10 batch accuracies, lambda_scale 1.5
        "hadw_released": {"anchor": "batch", "anchor_update": "released", "anchor_window": 10},
    })  # fmt: skip

    def _fields(self) -> dict[str, Mapping[str, object]]:
        registered = {n: e.preset for n, e in ESTIMATORS.items() if e.preset is not None}
        return {**self.BASE, **registered}

    def recipe(self, name: object) -> Mapping[str, object]:
        """The named recipe's fields (not yet a Dial: nothing is checked), else ValueError
        listing the recipes."""
        recipes = self._fields()
        if not isinstance(name, str) or name not in recipes:
            valid = ", ".join(sorted(recipes))
            raise ValueError(f"unknown preset {name!r}; valid presets: {valid}")
        return recipes[name]

    def __getitem__(self, name: str) -> Dial:
        return Dial(**self._fields()[name])

    def __contains__(self, name: object) -> bool:
        return name in self._fields()  # a name lookup; builds no Dial

    def __iter__(self) -> Iterator[str]:
        return iter(self._fields())

    def __len__(self) -> int:
        return len(self._fields())


# The three fixes beyond GRPO / Dr. GRPO / DAPO start from GRPO's std factor (their recipes are
# registered with them): lambda-GRPO with a learnable lambda from 0 (DAPO's token mean),
# Stratified GRPO on the truncated / finished split every task has, blended half and half, and
# HA-DW on the paper's batch anchor.
PRESETS: _Presets = _Presets()  # a Mapping[str, Dial]


def preset(name: str) -> Dial:
    """The named recipe's dial: one of PRESETS, built (and checked) once."""
    return Dial(**PRESETS.recipe(name))


def dial_from_config(cfg: Mapping) -> Dial:
    """{"preset": name, field: value, ...} -> the preset (default Dial()) with fields overridden;
    a mapping with keys of an arm's allocation too goes through read_arm instead."""
    _check_keys(cfg, dial_keys())
    return _dial(cfg)


def _check_keys(spec: Mapping, valid: tuple[str, ...]) -> None:
    if not isinstance(spec, Mapping):
        raise ValueError(f"a dial entry must be a mapping, got {type(spec).__name__}")
    unknown = [k for k in spec if k not in valid]
    if unknown:
        raise ValueError(f"unknown dial key {unknown[0]!r}; valid keys: {', '.join(valid)}")


def _dial(cfg: Mapping, max_new_tokens: int | None = None) -> Dial:
    """The preset's fields (default Dial() without one) with the entry's overridden, built (and
    each field checked) once: the recipe is merged as plain values, never built on its own."""
    values = dict(PRESETS.recipe(cfg["preset"])) if "preset" in cfg else {}
    values.update((k, v) for k, v in cfg.items() if k != "preset" and k not in ARM_KEYS)
    settings = dial_settings()
    norm = values.get("length_norm", settings["length_norm"].default)
    unset = values.get("max_length", settings["max_length"].default) is None
    if norm == "constant" and unset and max_new_tokens is not None:
        values["max_length"] = int(max_new_tokens)
    return Dial(**values)


BACKEND_SETTING = Setting(
    "own",
    "This arm's training backend: own (the pipeline's trainer, every dial field) or trl (TRL's "
    "GRPOTrainer; a field it cannot express is refused at DAG build). Default: train.backend.",
    choices=BACKENDS,
)
ARM_KEYS = ("group_size", "allocation", "backend")  # an arm's keys beside its dial's fields


def dial_keys() -> tuple[str, ...]:
    """The keys of a dial entry: `preset` and every Dial field (registered estimators' too)."""
    return ("preset", *dial_settings())


class Arm(NamedTuple):
    """One `dials.<name>` entry, resolved once: the estimator's Dial, the sample Allocation and
    the backend that trains it (own | trl)."""

    dial: Dial
    allocation: Allocation
    backend: str = "own"


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
    spec: Mapping,
    defaults: Mapping | None = None,
    *,
    max_new_tokens: int | None = None,
    backend: str = "own",
) -> Arm:
    """The Arm of one `dials.<name>` entry, every key checked here; `defaults` is
    `train.allocation`, `backend` is train.backend. An entry is a dial (a preset plus any Dial
    field) and, beside it, how the arm spreads its samples over prompts and what trains it:

        grpo:          {preset: grpo}
        grpo_adaptive: {preset: grpo, group_size: adaptive, allocation: {g_max: 8}}
        grpo_trl:      {preset: grpo, std_ddof: 1, eps: 0.0001, backend: trl}

    `group_size` (uniform | adaptive) is Allocation.scheme; `allocation` overrides `defaults` key
    by key; `backend` overrides the default. A dial with Dr. GRPO's constant normalizer and no
    max_length divides by max_new_tokens (the generation limit, TRL's max_completion_length)
    when it is given."""
    _check_keys(spec, (*dial_keys(), *ARM_KEYS))
    dial = _dial(spec, max_new_tokens)
    allocation = Allocation(
        scheme=spec.get("group_size", "uniform"),
        **{
            **_settings(defaults, "train.allocation"),
            **_settings(spec.get("allocation"), "dial allocation"),
        },
    )
    return Arm(dial, allocation, BACKEND_SETTING.check("backend", spec.get("backend", backend)))


def arm_fields(arm: Arm) -> dict:
    """The resolved fields a job rebuilds its Arm from (`arm_from_fields`), plain values only."""
    return {
        "dial": arm.dial.as_dict(),
        "allocation": asdict(arm.allocation),
        "backend": arm.backend,
    }


def arm_from_fields(resolved: Mapping) -> Arm:
    """An Arm from `arm_fields`: each field checked once by its Setting, nothing is re-read."""
    return Arm(
        Dial(**resolved["dial"]),
        Allocation(**resolved["allocation"]),
        BACKEND_SETTING.check("backend", resolved.get("backend", "own")),
    )

"""The config's arms, each `dials.<name>` entry resolved once (grpo_dial.core.dial.read_arm:
its Dial, its Allocation and its backend), and what the DAG derives from them: the fields each
job rebuilds its arm from, the arms whose estimator keeps per-step state, and each adaptive arm's
uniform twin. Nothing outside grpo_dial.dag reads `config["dials"]`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from grpo_dial.core.allocation import Allocation
from grpo_dial.core.dial import Arm, arm_fields, read_arm
from grpo_dial.core.estimators import active_estimators
from grpo_dial.core.settings import SettingError
from grpo_dial.dag import fail
from grpo_dial.dag.inputs import note

ARM_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")  # fullmatch: no trailing newline either


def resolve_arms(config: Mapping) -> dict[str, Arm]:
    """Every arm of `dials`, read with train.allocation's defaults, the generation limit and
    train.backend; train.allocation is checked on its own first, so a problem there is blamed
    on it rather than on the first arm. An adaptive arm whose g_max is below 2 is refused (every
    group would hold one response)."""
    train = config["train"]
    try:
        Allocation(**train.get("allocation", {}))
    except SettingError as error:
        fail(f"train.allocation.{error.name}", str(error))
    except (TypeError, ValueError) as error:
        fail("train.allocation", str(error))
    arms = {}
    for name, spec in config["dials"].items():
        if not ARM_NAME.fullmatch(str(name)):
            fail(
                f"dials.{str(name)[:40]!r}",
                "an arm's name is 1 to 64 letters, digits, '_' or '-' (it names folders and "
                "table rows)",
            )
        own = spec.get("allocation")
        if own is not None and not isinstance(own, Mapping):
            fail(
                f"dials.{name}.allocation",
                f"{own!r} is not a mapping; give overrides of train.allocation, e.g. "
                "{g_max: 16}",
            )
        try:
            arms[name] = read_arm(
                spec,
                train["allocation"],
                max_new_tokens=train["max_new_tokens"],
                backend=train.get("backend", "own"),
            )
        except SettingError as error:  # the one range check of a field at DAG build
            fail(f"dials.{name}.{error.name}", str(error))
        except ValueError as error:
            fail(f"dials.{name}", str(error))
        allocation = arms[name].allocation
        if allocation.scheme == "adaptive" and allocation.g_max < 2:
            own = isinstance(spec.get("allocation"), Mapping) and "g_max" in spec["allocation"]
            fail(
                f"dials.{name}.allocation.g_max" if own else "train.allocation.g_max",
                f"{allocation.g_max} gives arm {name!r} (group_size: adaptive) groups of one "
                "response: a group of one has no spread, so every advantage is 0; use 2 or more",
            )
    return arms


def job_fields(arms: Mapping[str, Arm]) -> dict[str, dict]:
    """Arm name -> the resolved fields its jobs get through `params:` (core.dial.arm_fields)."""
    return {name: arm_fields(arm) for name, arm in arms.items()}


def stateful(arm: Arm) -> bool:
    """Whether the arm uses a registered estimator that logs per-step state (lambda-GRPO's
    lambda, strata splits, the anchor): the figures add `estimators_training`."""
    return any(est.columns for est in active_estimators(arm.dial))


def uniform_twin(name: str, arms: Mapping[str, Arm]) -> str | None:
    """The first uniform arm whose resolved Dial equals adaptive arm `name`'s, or None."""
    for other, arm in arms.items():
        if other != name and arm.allocation.scheme == "uniform" and arm.dial == arms[name].dial:
            return other
    note(f"dial '{name}' (group_size: adaptive) has no uniform twin in dials; not compared")
    return None


def allocation_pairs(arms: Mapping[str, Arm]) -> dict[str, str]:
    """Adaptive arm -> its uniform twin, for every adaptive arm that has one."""
    return {
        name: twin
        for name, arm in arms.items()
        if arm.allocation.scheme == "adaptive" and (twin := uniform_twin(name, arms)) is not None
    }


def check_reference(key: str, reference: str, arms: Mapping[str, Arm]) -> None:
    """A reference arm (train.lr_match.reference, channel.reference) must be one of `dials`."""
    if reference not in arms:
        fail(key, f"'{reference}' is not in dials {sorted(arms)}")

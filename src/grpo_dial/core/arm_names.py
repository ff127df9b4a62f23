"""Display names of the arms, one source: `display_names()` is the registry's labels (every
registered estimator's `label`, core.estimators, read without torch) with `ARM_NAMES`, the names
of the arms that are no registered estimator (the recipes, the dial's factor settings, the
analyses' own arms). The summary reads it, and the stages hand it to the figures (which import
nothing of the project). A name in neither is shown as written in the config.
"""

from __future__ import annotations

ARM_NAMES = {  # arm key -> its name in the docs, the summary and every figure
    "grpo": "GRPO",
    "dr_grpo": "Dr. GRPO",
    "dapo": "DAPO",
    "dapo_keep": "token mean, no dynamic sampling",
    "std_constant": "alpha 1, constant normalizer",
    "nostd_sequence": "alpha 0, sequence normalizer",
    "grpo_adaptive": "GRPO, adaptive G",
    "dr_grpo_adaptive": "Dr. GRPO, adaptive G",
    "dr_grpo_lr_matched": "Dr. GRPO, lr matched",
    "dr_grpo_l3": "Dr. GRPO, L_max 3 (GRPO's step)",
    "hadw": "HA-DW, Eq. 10 anchor",  # the simulation's arm of preset hadw_grpo: one name
    "hadw_released": "HA-DW, released anchor",
    "hadw_prompt": "HA-DW, prompt anchor",
    "lambda_pos": "lambda fixed +1",
    "lambda_neg": "lambda fixed -1",
    "gpg_paper": "GPG, the paper's M",  # core.estimator_mass's curves that are no preset
    "reinforce_pp_baseline_response": "REINFORCE++ baseline, per response",
    "opo_constant": "OPO, constant normalizer",
}


def display_names() -> dict[str, str]:
    """Arm key -> display name: `ARM_NAMES` and every registered estimator's label (a key in
    both with two names raises)."""
    from grpo_dial.core.estimators import ESTIMATORS

    names = dict(ARM_NAMES)
    for est in ESTIMATORS.values():
        if names.setdefault(est.name, est.label) != est.label:
            raise ValueError(f"arm {est.name!r} is named {names[est.name]!r} and {est.label!r}")
    return names


def arm_name(arm: str) -> str:
    """The display name of an arm (`display_names`), or the config's key when it has none."""
    return display_names().get(str(arm), str(arm))


__all__ = ["ARM_NAMES", "arm_name", "display_names"]

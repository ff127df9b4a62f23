"""Display names of the arms, the one table: the run summary reads it, the figure stages hand it
to the figures (which import nothing of the project), and a registered estimator's `label` is
added to it (grpo_dial.core.estimators).

An arm is a `dials.<name>` entry (training), an arm of the controlled Bernoulli-logit run or of the
length-bias simulation; a name not listed here is shown as written in the config.
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
    "hadw_grpo": "HA-DW, Eq. 10 anchor",
    "hadw_released": "HA-DW, released anchor",
    "hadw_prompt": "HA-DW, prompt anchor",
    "lambda_grpo": "lambda-GRPO (learnable)",
    "stratified_grpo": "Stratified GRPO",
    "lambda_pos": "lambda fixed +1",
    "lambda_neg": "lambda fixed -1",
    # the engines' presets: as registered (core.engine_estimators / engine_losses), listed here
    # too so a figure or summary process that never imports the registry (no torch) names them
    "rloo": "RLOO",
    "opo": "OPO",
    "grpo_passk": "pass@k advantage",
    "reinforce_pp": "REINFORCE++",
    "batch_std": "batch std",
    "gpg": "GPG",
    "reinforce_pp_baseline": "REINFORCE++ baseline",
    "gdpo": "GDPO (one reward)",
    "gspo": "GSPO",
    "luspo": "LUSPO",
    "bnpo": "BNPO",
    "gpg_paper": "GPG, the paper's M",  # core.estimator_mass's curves that are no preset
    "reinforce_pp_baseline_response": "REINFORCE++ baseline, per response",
    "opo_constant": "OPO, constant normalizer",
}


def arm_name(arm: str) -> str:
    """The display name of an arm, or the config's key when the table has none."""
    return ARM_NAMES.get(str(arm), str(arm))


def add_arm_name(arm: str, name: str) -> None:
    """Add an arm's display name (a registered estimator's label); a different one for a listed
    arm raises."""
    if ARM_NAMES.setdefault(arm, name) != name:
        raise ValueError(f"arm {arm!r} is already named {ARM_NAMES[arm]!r}, not {name!r}")


__all__ = ["ARM_NAMES", "add_arm_name", "arm_name"]

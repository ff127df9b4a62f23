"""Display names of the arms, as docs/results.md writes them: the run summary uses them, and the
stages hand them to the figures (which import nothing of the project).

An arm is a `dials.<name>` entry (training), an arm of the controlled Bernoulli-logit run or of the
length-bias simulation; a name not listed here is shown as written in the config.
"""

from __future__ import annotations

ARM_NAMES = {
    "grpo": "GRPO",
    "dr_grpo": "Dr. GRPO",
    "dapo": "DAPO",
    "std_constant": "alpha 1, constant normalizer",
    "nostd_sequence": "alpha 0, sequence normalizer",
    "grpo_adaptive": "GRPO, adaptive G",
    "dr_grpo_adaptive": "Dr. GRPO, adaptive G",
    "dr_grpo_lr_matched": "Dr. GRPO, lr matched",
    "hadw": "HA-DW, batch anchor",
    "hadw_grpo": "HA-DW, batch anchor",
    "hadw_prompt": "HA-DW, prompt anchor",
    "lambda_grpo": "lambda-GRPO (learnable)",
    "stratified_grpo": "Stratified GRPO",
    "lambda_pos": "lambda fixed +1",
    "lambda_neg": "lambda fixed -1",
}


def arm_name(arm: str) -> str:
    """The docs' name of an arm, or the config's key when the docs have none."""
    return ARM_NAMES.get(str(arm), str(arm))


__all__ = ["ARM_NAMES", "arm_name"]

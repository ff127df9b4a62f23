"""The analyses' arms, in one table: each is an ordinary `dials.<name>` entry, read through the
one reader of an arm (grpo_dial.core.dial.read_arm) like the config's training arms.

The controlled simulation (analysis.simulate.controlled) and its length twin
(analysis.length_bias.tail) each run a subset; their config sets the settings every arm of a run
shares (the population std, eps, DAPO's redraws, L_max), laid over the entry. The engines'
estimators are arms of both (ENGINE_ARMS; in the length twin OPO under the constant normalizer,
where its drift has a closed form, and REINFORCE++ with its whitening over tokens).
"""

from __future__ import annotations

from collections.abc import Mapping

from grpo_dial.core.dial import Dial, read_arm

ANALYSIS_ARMS: Mapping[str, Mapping[str, object]] = {  # arm -> its dial entry
    "grpo": {"preset": "grpo"},
    "dr_grpo": {"preset": "dr_grpo"},
    "dapo": {"preset": "dapo"},
    "dr_grpo_lr_matched": {"preset": "dr_grpo"},  # Dr. GRPO at GRPO's mean step size
    "hadw": {"preset": "hadw_grpo"},
    "hadw_prompt": {"preset": "hadw_grpo", "anchor": "prompt"},
    "std_constant": {"preset": "grpo", "length_norm": "constant"},  # alpha 1, constant
    "nostd_sequence": {"preset": "dr_grpo", "length_norm": "sequence"},  # alpha 0, 1/|o|
    "lambda_pos": {"preset": "lambda_grpo", "lambda_learnable": False, "lambda_value": 1.0},
    "lambda_neg": {"preset": "lambda_grpo", "lambda_learnable": False, "lambda_value": -1.0},
    # the engines' estimators (core.engine_estimators), each its preset
    "rloo": {"preset": "rloo"},
    "opo": {"preset": "opo"},
    "grpo_passk": {"preset": "grpo_passk"},
    "batch_std": {"preset": "batch_std"},
    "gpg": {"preset": "gpg"},
    "reinforce_pp_baseline": {"preset": "reinforce_pp_baseline"},  # whitened over tokens
    "reinforce_pp": {"preset": "reinforce_pp"},
    "opo_constant": {"preset": "opo", "length_norm": "constant"},  # its drift's closed form
}
ENGINE_ARMS = (
    "rloo", "opo", "grpo_passk", "batch_std", "gpg", "reinforce_pp_baseline", "reinforce_pp",
)  # fmt: skip
SIMULATION_DEFAULT = ("grpo", "dr_grpo", "dapo", "dr_grpo_lr_matched", "hadw", "hadw_prompt")
SIMULATION_ARMS = (*SIMULATION_DEFAULT, *ENGINE_ARMS)
LENGTH_BIAS_DEFAULT = (
    "grpo", "dr_grpo", "dapo", "std_constant", "nostd_sequence", "lambda_pos", "lambda_neg",
)  # fmt: skip
LENGTH_BIAS_ENGINE_ARMS = ("opo_constant", "reinforce_pp_baseline", "reinforce_pp", "rloo")
LENGTH_BIAS_ARMS = (*LENGTH_BIAS_DEFAULT, *LENGTH_BIAS_ENGINE_ARMS)


def analysis_dial(arm: str, valid: tuple[str, ...], **shared: object) -> Dial:
    """The Dial of analysis arm `arm` (one of `valid`) with the run's shared settings."""
    if arm not in valid:
        raise ValueError(f"unknown arm {arm!r}; valid arms: {', '.join(valid)}")
    return read_arm({**ANALYSIS_ARMS[arm], **shared}).dial

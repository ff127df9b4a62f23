"""The analyses' arms, in one table: each is an ordinary `dials.<name>` entry, read through the
one reader of an arm (grpo_dial.core.dial.read_arm) like the config's training arms.

The controlled simulation (analysis.simulate) and its length twin (analysis.length_bias) each
run a subset; their config sets the settings every arm of a run shares (the population std,
eps, DAPO's redraws, L_max), laid over the entry.
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
}
SIMULATION_ARMS = ("grpo", "dr_grpo", "dapo", "dr_grpo_lr_matched", "hadw", "hadw_prompt")
LENGTH_BIAS_ARMS = (
    "grpo", "dr_grpo", "dapo", "std_constant", "nostd_sequence", "lambda_pos", "lambda_neg",
)  # fmt: skip


def analysis_dial(arm: str, valid: tuple[str, ...], **shared: object) -> Dial:
    """The Dial of analysis arm `arm` (one of `valid`) with the run's shared settings."""
    if arm not in valid:
        raise ValueError(f"unknown arm {arm!r}; valid arms: {', '.join(valid)}")
    return read_arm({**ANALYSIS_ARMS[arm], **shared}).dial

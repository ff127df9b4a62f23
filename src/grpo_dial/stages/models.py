"""Rule file models.smk: the packaged SmolLM2-135M-Instruct GGUF converted into a trainable
model.
"""

from __future__ import annotations

from collections.abc import Mapping


def convert_smollm(input: Mapping, output: Mapping, params: Mapping) -> None:
    """The packaged model (params `distribution`, `dtype`) -> output model."""
    from grpo_dial.policy.convert import SMOLLM_DISTRIBUTION, convert_gguf, packaged_gguf

    gguf = packaged_gguf(params.get("distribution", SMOLLM_DISTRIBUTION))
    convert_gguf(gguf, output["model"], params.get("dtype", "bfloat16"))

"""Rule file training.smk's real-data lens: length of correct against incorrect responses in
public logged model outputs, and its figure.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

import pandas as pd

from grpo_dial.tables import read_table, write_table

log = logging.getLogger("grpo_dial")


def real_lengths(input: Mapping, output: Mapping, params: Mapping) -> None:
    """Length of correct against incorrect responses on the logged real-data files."""
    from grpo_dial.analysis import real_lengths as rl

    tokenizer = None
    if params.get("tokenizer"):
        from transformers import AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(params["tokenizer"])
    loaders = {"math_cot": rl.load_math_cot_responses, "gsm8k": rl.load_gsm8k_responses}
    frames = []
    for name, loader in loaders.items():
        if name in input:
            loaded = loader(input[name], tokenizer=tokenizer)
            log.info("%s: %d problems, %d skipped", name, loaded.n_problems, loaded.n_skipped)
            frames.append(loaded.responses)
    responses = pd.concat(frames, ignore_index=True)
    write_table(responses, output["responses"])
    table = rl.length_by_correctness(responses, n_boot=params["n_boot"], seed=params["seed"])
    write_table(table, output["by_correctness"])


def real_lengths_figure(input: Mapping, output: Mapping, params: Mapping) -> None:
    from grpo_dial.figures import save
    from grpo_dial.figures.real_lengths import real_lengths_figure as draw

    save(draw(read_table(input["by_correctness"])), output["figure_png"], output["figure_pdf"])

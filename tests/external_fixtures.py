"""Logged runs in exactly the formats TRL and verl write, for the bring-your-own-run tests.

A run of `steps` steps, `prompts` prompts per step, G responses each; a prompt's pass rate is
fixed; incorrect responses grow by `growth` characters per step, correct ones stay put.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd


def _rollouts(steps: int, prompts: int, group_size: int, growth: float, seed: int):
    rng = np.random.default_rng(seed)
    pass_rate = rng.uniform(0.05, 0.95, prompts * 3)  # (pool,)
    for step in range(1, steps + 1):
        chosen = rng.choice(len(pass_rate), prompts, replace=False)
        for j in chosen:
            correct = rng.random(group_size) < pass_rate[j]  # (G,)
            for ok in correct:
                length = 40 if ok else int(40 + growth * step + rng.integers(0, 5))
                yield step, f"What is {j} + {j}?", "x" * length, bool(ok)


def write_trl_run(directory: Path, steps=12, prompts=6, group_size=4, growth=3.0, seed=0) -> Path:
    """<directory>/completions/completions_<step>.parquet as GRPOTrainer(log_completions=True)."""
    out = directory / "completions"
    out.mkdir(parents=True, exist_ok=True)
    rows = pd.DataFrame(
        _rollouts(steps, prompts, group_size, growth, seed),
        columns=["step", "prompt", "completion", "correct"],
    )
    rows["accuracy_reward"] = rows.pop("correct").astype(float)
    rows["advantage"] = rows.groupby(["step", "prompt"])["accuracy_reward"].transform(
        lambda r: r - r.mean()
    )
    for step, frame in rows.groupby("step"):
        frame.to_parquet(out / f"completions_{step:05d}.parquet", index=False)
    return directory


def write_verl_run(directory: Path, steps=12, prompts=6, group_size=4, growth=3.0, seed=1) -> Path:
    """<directory>/<step>.jsonl as verl with trainer.rollout_data_dir set."""
    directory.mkdir(parents=True, exist_ok=True)
    lines: dict[int, list[str]] = {}
    for step, prompt, response, ok in _rollouts(steps, prompts, group_size, growth, seed):
        record = {"input": prompt, "output": response, "gts": "42",
                  "score": 1.0 if ok else 0.0, "step": step}  # fmt: skip
        lines.setdefault(step, []).append(json.dumps(record))
    for step, text in lines.items():
        (directory / f"{step}.jsonl").write_text("\n".join(text) + "\n")
    return directory

"""Shared helpers of the trainer, checkpoint and identity-probe tests: a fake task whose random
policy already has pass rates strictly between 0 and 1, and a tiny saved Llama."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from grpo_dial.data.tasks.base import LengthSplit, Problem, Verdict
from grpo_dial.policy.model import PolicySpec, build_char_tokenizer, build_tiny_llama, save_policy
from grpo_dial.policy.rollout import generate_groups

TINY = PolicySpec(
    n_layers=1, hidden_size=32, n_heads=2, intermediate_size=64, max_position_embeddings=64
)


class FakeTask:
    """Correct iff finished and the first character is allowed: 'abc' (easy) or 'a' (hard).

    An untrained char-level policy over 7 tokens puts ~3/7 and ~1/7 on those, so groups of 4
    are a mix of silent and informative ones.
    """

    name = "fake"
    styles = ("plain",)
    alphabet = "abc"

    def problems(self, split: str, n: int, seed: int) -> list[Problem]:
        rng = np.random.default_rng([seed, len(split)])
        out = []
        for i in range(n):
            hard = bool(rng.random() < 0.5)
            prompt = "".join(rng.choice(list("abc"), size=3))
            label = "hard" if hard else "easy"
            out.append(Problem(f"{split}-{seed}-{i}", prompt, "a" if hard else "abc", label))
        return out

    def demonstration(self, problem: Problem, style: str, rng: np.random.Generator) -> str:
        return problem.reference[0]

    def verify(self, problem: Problem, response: str, finished: bool) -> Verdict:
        if not finished:
            return Verdict(False, True, None)
        return Verdict(response[:1] != "" and response[0] in problem.reference, False, response[:1])

    def length_split(self, problem: Problem, response: str) -> LengthSplit | None:
        if response.startswith("b"):
            return None  # a task may not know; the records must carry NaN
        return LengthSplit(work=min(len(response), 2), redundant=max(len(response) - 2, 0))


def tiny_policy(seed: int = 0):
    tokenizer = build_char_tokenizer(FakeTask.alphabet)
    return build_tiny_llama(TINY, tokenizer, seed=seed).eval(), tokenizer


def save_tiny(directory: Path, seed: int = 0) -> Path:
    model, tokenizer = tiny_policy(seed)
    save_policy(model, tokenizer, directory)
    return directory


def informative_batch(model, tokenizer, n_problems: int = 6, group_size: int = 4, seed: int = 0):
    """(rollouts, rewards) of sampled groups of the fake task; rewards (N,) float 0/1."""
    task = FakeTask()
    problems = task.problems("train", n_problems, seed)
    gen = torch.Generator().manual_seed(seed)
    ro = generate_groups(model, tokenizer, problems, group_size, 8, 1.0, gen)
    rewards = torch.tensor(
        [
            float(task.verify(p, t, f).correct)
            for p, t, f in zip(ro.problems, ro.texts, ro.finished.tolist(), strict=True)
        ]
    )
    return ro, rewards


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    """Tiny models run far faster on one thread (no OpenMP hand-off, no fight over 2 cores)."""
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)

"""Our side of the bench: the training loop's own step function, one call per bench step.

`trainer_state` builds the state train_run keeps between steps (grpo_dial.train.loop.RunState)
around the workload's model and pool with the trainer's own set-up, `loop.new_run`. Each step
then calls `loop.run_step`, the function train_run calls every step: sample_batch (generate +
score), the pass-rate tracker, advantages, policy_update and the step's records. So the bench
times exactly what trains, and cannot drift from it. What a training run does around run_step is
left out: held-out evaluation, the identity probe (identity_every = 0) and the checkpoint; there
is no KL term (kl_coef = 0, as TRL's beta). The dial is TRL's default GRPO (sample std, eps 1e-4).

Timing: total around run_step; generation and scoring by wrapping generate_groups and score in
the module sample_batch calls them from; training = the rest. Completion tokens and the
informative rows (A != 0) are read off the step's response records, which the trainer writes.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable

from grpo_dial.tools.bench.timing import timed
from grpo_dial.tools.bench.workload import Setup, StepSettings

GRPO_DIAL = {"preset": "grpo", "std_ddof": 1, "eps": 1e-4}  # TRL's scale_rewards='group'
KEPT_STEPS = 4  # records kept before the bench empties them (keeps its memory flat)


def train_config(settings: StepSettings):
    """The TrainConfig of the workload: its batch shape, sampling and optimizer; no probe."""
    from grpo_dial.train.config import TrainConfig

    return TrainConfig(
        prompts_per_step=settings.prompts,
        group_size=settings.group_size,
        max_new_tokens=settings.max_new_tokens,
        temperature=settings.temperature,
        lr=settings.lr,
        grad_clip=settings.grad_clip,
        seed=settings.seed,
        device=settings.device,
        progress=False,
        identity_every=0,
    )


def trainer_state(setup: Setup, config, dial):
    """The loop's per-run state for setup's model and pool, built by train_run's own set-up
    (loop.new_run; no frozen base: kl_coef is 0; no held-out set: the bench does not evaluate)."""
    from grpo_dial.train import loop

    return loop.new_run(setup.model, setup.tokenizer, None, setup.pool, [], dial, config, None)


def make_our_step(setup: Setup, settings: StepSettings) -> Callable[[], dict[str, float]]:
    """A closure running one step of the trainer (loop.run_step) and returning its timings."""
    from grpo_dial.core.dial import dial_from_config
    from grpo_dial.train import loop

    config = train_config(settings)
    dial = dial_from_config(GRPO_DIAL)
    state = trainer_state(setup, config, dial)
    step = [0]

    def run() -> dict[str, float]:
        sink: dict[str, float] = {}
        step[0] += 1
        sampler = sys.modules[loop.sample_batch.__module__]  # where generate_groups is looked up
        with timed(sampler, "generate_groups", sink), timed(sampler, "score", sink):
            t0 = time.perf_counter()
            loop.run_step(state, setup.task, dial, config, step[0])
            total = time.perf_counter() - t0
        responses = state.records["responses"][-1]
        advantages = responses["advantage"]  # (N,) every response of the step
        out = {
            "total": total,
            "informative": sum(a != 0 for a in advantages) / len(advantages),
            "generation": sink.get("generate_groups", 0.0),
            "scoring": sink.get("score", 0.0),
            "tokens": int(sum(responses["tokens"])),
        }
        if len(state.records["responses"]) > KEPT_STEPS:
            for table in state.records.values():
                table.clear()
        return out

    return run

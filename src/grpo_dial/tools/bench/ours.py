"""Our side of the bench: the training loop's own step function, one call per bench step.

`trainer_state` builds the state train_run keeps between steps (grpo_dial.train.loop._Run)
around the workload's model and pool with the trainer's own helpers (make_optimizer,
sampling_rngs, band_map, tracker_prior); each step then calls `loop._step`, the function
train_run calls every step: sample_batch (generate + score), the pass-rate tracker, advantages,
policy_update and the step's records. So the bench times exactly what trains, and cannot drift
from it. What a training run does around _step is left out: held-out evaluation, the identity
probe (identity_every = 0) and the checkpoint; there is no KL term (kl_coef = 0, as TRL's beta).
The dial is TRL's default GRPO (sample std, eps 1e-4).

Timing: total around _step; generation and scoring by wrapping generate_groups and score in the
module sample_batch calls them from; training = the rest. Completion tokens and the informative
rows (A != 0) are read off the step's response records, which the trainer writes itself.
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


def trainer_state(setup: Setup, config):
    """The loop's per-run state for setup's model and pool, as train_run's set-up builds it
    (no frozen base: kl_coef is 0; no held-out set: the bench does not evaluate)."""
    from grpo_dial.passrates.tracker import tracker_prior
    from grpo_dial.train import loop
    from grpo_dial.train import records as rec
    from grpo_dial.train.step import make_optimizer, sampling_rngs

    ids = [p.prompt_id for p in setup.pool]
    bands, vocab = rec.band_map(ids, [p.difficulty for p in setup.pool], None)
    rng, generator = sampling_rngs(config)
    return loop._Run(
        model=setup.model,
        tokenizer=setup.tokenizer,
        ref_model=None,
        optimizer=make_optimizer(setup.model, config),
        rng=rng,
        generator=generator,
        pool=setup.pool,
        heldout=[],
        bands=bands,
        vocab=vocab,
        key={},
        tracker=tracker_prior(ids, None, config.allocation.prior_strength),
    )


def make_our_step(setup: Setup, settings: StepSettings) -> Callable[[], dict[str, float]]:
    """A closure running one step of the trainer (loop._step) and returning its timings."""
    from grpo_dial.core import advantage
    from grpo_dial.train import loop

    config = train_config(settings)
    dial = advantage.dial_from_config(GRPO_DIAL)
    state = trainer_state(setup, config)
    step = [0]

    def run() -> dict[str, float]:
        sink: dict[str, float] = {}
        step[0] += 1
        sampler = sys.modules[loop.sample_batch.__module__]  # where generate_groups is looked up
        with timed(sampler, "generate_groups", sink), timed(sampler, "score", sink):
            t0 = time.perf_counter()
            loop._step(state, setup.task, dial, config, step[0])
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

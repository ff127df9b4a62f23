"""Our side of the bench is the training loop's own step: the bench calls loop.run_step with
the state train_run keeps (built by loop.new_run), times its generation and scoring, and reads
tokens off its records."""

from __future__ import annotations

import numpy as np
import torch

from grpo_dial.core.dial import preset
from grpo_dial.tools.bench import ours
from grpo_dial.tools.bench.workload import StepSettings, build_setup
from grpo_dial.train import loop

TINY = {"n_layers": 1, "hidden_size": 16, "prompts": 2, "group_size": 2, "max_new_tokens": 4}


def test_the_bench_step_is_the_trainers_step(monkeypatch) -> None:
    calls = []
    trainer_step = loop.run_step

    def spy(run, task, dial, config, step):
        calls.append((run, task, dial, config, step))
        return trainer_step(run, task, dial, config, step)

    monkeypatch.setattr(loop, "run_step", spy)
    setup = build_setup(StepSettings(**TINY))
    run = ours.make_our_step(setup, StepSettings(**TINY))
    first, second = run(), run()
    assert [c[-1] for c in calls] == [1, 2]
    state, task, dial, config, _ = calls[0]
    assert isinstance(state, loop.RunState) and state.model is setup.model and task is setup.task
    trl_default = preset("grpo").replace(std_ddof=1, eps=1e-4)  # scale_rewards="group"
    assert dial == trl_default
    assert config.prompts_per_step == 2 and config.group_size == 2
    assert len(state.records["steps"]) == 2  # the trainer's own records of both steps
    for timing in (first, second):
        assert timing["tokens"] == 2 * 2 * 4  # EOS suppressed: every response is full length
        assert 0 <= timing["informative"] <= 1


def test_a_stand_in_step_is_what_the_bench_measures(monkeypatch) -> None:
    """Whatever loop.run_step does is what the bench reports: it does not re-type the step."""

    def stand_in(run, task, dial, config, step):
        run.records["responses"].append({"advantage": [0.0, 1.0, 0.0, 0.0], "tokens": [7] * 4})

    monkeypatch.setattr(loop, "run_step", stand_in)
    setup = build_setup(StepSettings(**TINY))
    timing = ours.make_our_step(setup, StepSettings(**TINY))()
    assert timing["tokens"] == 28 and timing["informative"] == 0.25
    assert timing["generation"] == 0.0 and timing["scoring"] == 0.0


def test_a_step_trains_and_times_its_phases() -> None:
    setup = build_setup(StepSettings(**TINY))
    before = [p.detach().clone() for p in setup.model.parameters()]
    run = ours.make_our_step(setup, StepSettings(**TINY))
    timings = [run() for _ in range(ours.KEPT_STEPS + 1)]
    after = list(setup.model.parameters())
    assert any(not torch.equal(b, a) for b, a in zip(before, after, strict=True))
    for t in timings:
        assert t["generation"] > 0 and t["scoring"] > 0
        assert t["total"] > t["generation"] + t["scoring"]


def test_trainer_state_is_built_by_the_trainers_set_up(monkeypatch) -> None:
    settings = StepSettings(**TINY)
    setup = build_setup(settings)
    config = ours.train_config(settings)
    dial = preset("grpo")
    built = []
    new_run = loop.new_run
    monkeypatch.setattr(loop, "new_run", lambda *a: built.append(a) or new_run(*a))
    state = ours.trainer_state(setup, config, dial)
    assert len(built) == 1 and built[0][0] is setup.model and built[0][3] is setup.pool
    assert config.identity_every == 0 and config.kl_coef == 0 and state.ref_model is None
    assert isinstance(state.optimizer, torch.optim.AdamW)
    assert state.optimizer.param_groups[0]["lr"] == settings.lr
    assert set(state.bands) == {p.prompt_id for p in setup.pool}
    assert all(np.array_equal(t, np.zeros(len(setup.pool))) for t in state.tracker)
    first = state.rng.permutation(10)
    assert np.array_equal(first, np.random.default_rng(settings.seed).permutation(10))

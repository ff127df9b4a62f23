"""backends/own_replay.py at the edges the main tests leave open: the whole step read on fewer
rows than the sample holds, a generation config's extra EOS id, mode_logits' default rows, the
refusal when a probe's step moves the weights, and the probe steps' default numbering."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
import torch
from test_own_replay import POOL, TRAIN, make_base

from grpo_dial.analysis.aware.kernel import base_responses
from grpo_dial.backends.own_cells import cell_config
from grpo_dial.backends.own_replay import mode_logits, probe_state, replay, state_gradients
from grpo_dial.core.dial import read_arm


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    return make_base(tmp_path_factory)


def _replay(base, steps):
    path, task, _, _ = base
    return replay(path, task, task.problems("train", POOL, 0), task.problems("heldout", 1, 0),
                  read_arm({"preset": "grpo"}), TRAIN, 1, POOL, 0, steps, "cpu", "markers")


def _sample(run, base):
    _, task, tok, _ = base
    r, _ = base_responses(run.model, tok, task, task.problems("train", 6, 0), 4, 12, 1.0,
                          torch.Generator().manual_seed(3), np.random.default_rng(3))  # fmt: skip
    return r


def test_the_whole_step_reads_the_logits_on_the_first_rows_only(base):
    """step = (lr 2, sample of 24, rows 12): wrong_step is (L(w - 2 g) - L(w)) / 2 with both L
    on the sample's first 12 rows, as a real SGD step of the replayed run at lr 2 moves them."""
    from grpo_dial.train import loop

    _, task, _, _ = base
    arm = read_arm({"preset": "grpo"})
    config = cell_config(TRAIN, arm, POOL, 0, 1)
    run = _replay(base, 2)
    r = _sample(run, base)
    assert len(r) == 24
    jw, jc = state_gradients(run, r, "markers")
    got = probe_state(run, task, arm.dial, config, 1, jw, jc, 2, (2.0, r, 12))
    stepped = _replay(base, 2)
    at = mode_logits(stepped.model, stepped.tokenizer, r, 12)
    for group in stepped.optimizer.param_groups:
        group["lr"] = 2.0
    loop.run_step(stepped, task, arm.dial, replace(config, grad_clip=None), 3)
    moved = mode_logits(stepped.model, stepped.tokenizer, r, 12)
    for m in ("wrong", "correct"):
        assert np.isfinite(moved[m]) and moved[m] != mode_logits(stepped.model,
                                                                stepped.tokenizer, r)[m]
        assert got[f"{m}_step"].iloc[0] == pytest.approx((moved[m] - at[m]) / 2.0, rel=1e-6)


def test_a_generation_configs_extra_eos_id_counts_as_eos(base):
    """A second EOS id in the generation config leaves the continue set and joins the EOS set:
    log P(continue) - log P(EOS) falls at every position, so each mode's mean falls."""
    run = _replay(base, 0)
    r = _sample(run, base)
    tok = run.tokenizer
    plain = mode_logits(run.model, tok, r)
    extra = next(i for i in range(run.model.config.vocab_size) if i != tok.eos_token_id
                 and i != tok.pad_token_id)  # fmt: skip
    run.model.generation_config.eos_token_id = [tok.eos_token_id, extra]
    both = mode_logits(run.model, tok, r)
    for m in ("wrong", "correct"):
        assert np.isfinite(plain[m]) and both[m] < plain[m]


def test_the_probe_refuses_a_step_that_moves_the_weights(base):
    """An optimizer hook that shifts a weight after each step: the probe raises its line."""
    _, task, _, _ = base
    arm = read_arm({"preset": "grpo"})
    run = _replay(base, 0)
    r = _sample(run, base)
    jw, jc = state_gradients(run, r, "markers")
    first = next(p for p in run.model.parameters() if p.requires_grad)

    def shift(*_):
        with torch.no_grad():
            first.add_(1.0)

    run.optimizer.register_step_post_hook(shift)
    with pytest.raises(RuntimeError, match=r"^probe_state: the weights moved; the probe must "
                       r"stay at the state$"):  # fmt: skip
        probe_state(run, task, arm.dial, cell_config(TRAIN, arm, POOL, 0, 1), 1, jw, jc)



def test_mode_logits_reads_the_first_512_responses_by_default(base):
    """A sample of 520: the default is rows = 512, and row 513 would change the means."""
    _, task, tok, _ = base
    run = _replay(base, 0)
    r, _ = base_responses(run.model, tok, task, task.problems("train", 130, 0), 4, 12, 1.0,
                          torch.Generator().manual_seed(5), np.random.default_rng(5))  # fmt: skip
    assert len(r) == 520
    first = mode_logits(run.model, tok, r, 512)
    assert mode_logits(run.model, tok, r) == first
    assert mode_logits(run.model, tok, r, 513) != first


def test_the_probes_steps_are_numbered_after_the_base_by_default(base):
    """Two probe batches from the base with the default start: the run records them as its
    steps 1 and 2 (the allocation table's step column)."""
    _, task, _, _ = base
    arm = read_arm({"preset": "grpo"})
    run = _replay(base, 0)
    jw, jc = state_gradients(run, _sample(run, base), "markers")
    probe_state(run, task, arm.dial, cell_config(TRAIN, arm, POOL, 0, 1), 2, jw, jc)
    steps = [sorted(set(chunk["step"])) for chunk in run.records["allocation"]]
    assert steps == [[1], [2]]

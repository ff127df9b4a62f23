"""TRL's GRPOTrainer against our own estimator on the same tiny model, prompts and seed: its
advantages equal grpo_dial.core.advantage.advantages, and its loss equals our aggregation of
the same per-token losses, for every dial the trl backend translates: GRPO, Dr. GRPO, DAPO,
scale_rewards 'batch', LUSPO, GSPO's sequence ratio and BNPO's per-micro-batch token mean; with
kl_coef > 0 on a reused batch its loss adds our k3 KL to the base, aggregated like the loss."""

from __future__ import annotations

import warnings

import pytest
import torch
from _rl_fixtures import FakeTask, one_thread, tiny_policy  # noqa: F401 (autouse)

from grpo_dial.backends.trl.config import grpo_config_kwargs
from grpo_dial.backends.trl.run import make_reward, prompt_column
from grpo_dial.core import advantage
from grpo_dial.core.dial import dial_from_config

trl = pytest.importorskip("trl")

# Two float32 sums of the same terms in another order differ by a few units in the last place:
# at a loss of 16 one ulp is 1.9e-6, above an absolute 1e-6 (TRL 1.16 on transformers 5.25 and
# accelerate 1.16 lands one ulp off there). 4 float32 epsilons relative: far below every gap the
# tests tell apart (>= 1e-4; the bias-corrected KL's is 15 at that loss).
F32_ULPS = 4 * torch.finfo(torch.float32).eps
TRAIN = {"steps": 1, "prompts_per_step": 4, "group_size": 4, "max_new_tokens": 6, "lr": 0.05,
         "seed": 3, "updates_per_batch": 2, "grad_clip": None}  # fmt: skip
DIALS = {
    "grpo": {"preset": "grpo", "std_ddof": 1, "eps": 1e-4},
    "dr_grpo": {"preset": "dr_grpo", "max_length": 6},
    "dapo": {"preset": "dapo", "silent": "keep", "std_ddof": 1, "eps": 1e-4},
    "batch_std": {"preset": "batch_std"},  # scale_rewards='batch'
    "luspo": {"preset": "luspo", "std_ddof": 1, "eps": 1e-4},  # and importance 'sequence'
    "gspo": {"preset": "gspo", "std_ddof": 1, "eps": 1e-4},  # clip 3e-4 / 4e-4 binds
}


def run_trl(dial, tmp_path, train=TRAIN):
    """One batch (steps 1), two optimizer steps on it (updates_per_batch 2: num_iterations 2,
    max_steps 2, so the second step's ratio moves off 1 and the clip can bind); per step: TRL's
    logged rewards and advantages in generation order, and what _compute_loss saw and
    returned."""
    from datasets import Dataset
    from transformers.trainer_callback import PrinterCallback

    model, tokenizer = tiny_policy(seed=0)
    if train.get("kl_coef"):  # TRL loads its reference model from the policy's path
        from grpo_dial.policy.model import save_policy

        save_policy(model, tokenizer, tmp_path / "base")
        model.config._name_or_path = str(tmp_path / "base")
    model.train()
    task = FakeTask()
    pool = task.problems("train", 16, 0)
    seen = []

    class Capture(trl.GRPOTrainer):
        def _compute_loss(self, model, inputs):
            loss = super()._compute_loss(model, inputs)
            ids = torch.cat([inputs["prompt_ids"], inputs["completion_ids"]], 1)
            att = torch.cat([inputs["prompt_mask"], inputs["completion_mask"]], 1)
            with torch.no_grad():
                logps = self._get_per_token_logps_and_entropies(
                    model, ids, att, inputs["completion_ids"].size(1)
                )[0]
            logged = self._logs
            seen.append({
                "loss": float(loss.detach()), "logps": logps, "inputs": inputs,
                "rewards": list(logged["rewards"]["verifier"]),
                "advantages": list(logged["advantages"]),
            })  # fmt: skip
            return loss

    args = trl.GRPOConfig(
        output_dir=str(tmp_path), use_cpu=True, report_to="none", save_strategy="no",
        logging_steps=1, log_completions=True, num_completions_to_print=0, disable_tqdm=True,
        **grpo_config_kwargs(dial, train),
    )  # fmt: skip
    data = Dataset.from_dict({"prompt": prompt_column(tokenizer, pool), "idx": list(range(16))})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        trainer = Capture(
            model=model, reward_funcs=make_reward(task, pool, {tokenizer.eos_token_id}),
            args=args, train_dataset=data, processing_class=tokenizer,
        )  # fmt: skip
        trainer.remove_callback(PrinterCallback)
        trainer.train()
    return seen


@pytest.mark.parametrize("name", list(DIALS))
def test_trl_advantages_and_loss_equal_ours(name, tmp_path):
    dial = dial_from_config(DIALS[name])
    seen = run_trl(dial, tmp_path)
    assert len(seen) == 2
    g = TRAIN["group_size"]
    rewards = torch.tensor(seen[0]["rewards"], dtype=torch.float64)  # (N,) generation order
    group_ids = torch.arange(len(rewards)) // g  # TRL's RepeatSampler: G rows per prompt
    ours = advantage.advantages(rewards, group_ids, dial)
    trls = torch.tensor(seen[0]["advantages"], dtype=torch.float64)
    assert advantage.silent_mask(rewards, group_ids).float().mean() < 1  # a gradient to test
    torch.testing.assert_close(trls, ours, atol=1e-6, rtol=0)

    ratios_moved = False
    for step in seen:
        inputs = step["inputs"]  # rows shuffled together; every aggregation ignores row order
        logp = step["logps"]  # (B, T) with the weights _compute_loss used
        old = inputs.get("old_per_token_logps")
        old = logp if old is None else old
        ratios_moved |= bool((logp - old).abs().max() > 1e-3)
        mask = inputs["completion_mask"].to(logp.dtype)  # (B, T)
        expected = advantage.policy_loss(logp, old, inputs["advantages"], mask, dial)
        assert step["loss"] == pytest.approx(float(expected), abs=1e-6, rel=F32_ULPS)
    assert ratios_moved  # the second update's ratio is off 1: the clip is exercised


def _pad(x: torch.Tensor, width: int) -> torch.Tensor:
    return torch.nn.functional.pad(x, (0, width - x.shape[1]))


def test_trl_bnpo_equals_ours_over_each_optimizer_step(tmp_path):
    """bnpo with 4 micro-batches of 4 rows a step: TRL's loss per micro-batch is its token mean
    over the 4 accumulation steps; summed over a step's micro-batches it is our bnpo loss of
    the step's rows in TRL's order (bnpo_rows 4)."""
    dial = dial_from_config({"preset": "bnpo", "bnpo_rows": 4, "std_ddof": 1, "eps": 1e-4})
    seen = run_trl(dial, tmp_path, {**TRAIN, "micro_batch": 4})
    assert len(seen) == 8  # 2 optimizer steps x 4 micro-batches
    for step in (seen[:4], seen[4:]):
        width = max(s["logps"].shape[1] for s in step)
        logp = torch.cat([_pad(s["logps"], width) for s in step])
        old = torch.cat([
            _pad(s["logps"] if s["inputs"].get("old_per_token_logps") is None
                 else s["inputs"]["old_per_token_logps"], width) for s in step
        ])  # fmt: skip
        mask = torch.cat([_pad(s["inputs"]["completion_mask"].to(logp.dtype), width) for s in step])
        adv = torch.cat([s["inputs"]["advantages"] for s in step])
        expected = advantage.policy_loss(logp, old, adv, mask, dial)
        total = sum(s["loss"] for s in step)
        assert total == pytest.approx(float(expected), abs=1e-6, rel=F32_ULPS)
        token_mean = advantage.policy_loss(logp, old, adv, mask, dial.replace(length_norm="token"))
        assert abs(float(token_mean) - float(expected)) > 1e-4  # the micro-batch scope matters


@pytest.mark.parametrize("name", ["grpo", "dapo"])
def test_trl_kl_term_is_our_k3_estimator_on_a_reused_batch(name, tmp_path):
    """kl_coef 0.7 on one batch updated twice: each step's loss is the policy loss plus 0.7 x
    the dial's aggregation of exp(d) - d - 1, d = log pi_ref - log pi (grpo_dial.train.step).
    TRL's default use_bias_correction_kl multiplies the KL by pi / pi_old, which the second
    update moves off 1: that estimator differs here by more than the tolerance."""
    dial = dial_from_config(DIALS[name])
    beta = 0.7
    seen = run_trl(dial, tmp_path, {**TRAIN, "kl_coef": beta, "lr": 0.2})
    assert len(seen) == 2
    aggregate = advantage.make_aggregator(dial)
    corrected_gap = 0.0
    for step in seen:
        inputs = step["inputs"]
        logp = step["logps"]  # (B, T)
        old = inputs.get("old_per_token_logps")
        old = logp if old is None else old
        mask = inputs["completion_mask"].to(logp.dtype)  # (B, T)
        d = inputs["ref_per_token_logps"] - logp  # (B, T)
        k3 = torch.exp(d) - d - 1.0  # (B, T)
        policy = advantage.policy_loss(logp, old, inputs["advantages"], mask, dial)
        expected = policy + beta * aggregate(k3, mask)
        assert step["loss"] == pytest.approx(float(expected), abs=1e-6, rel=F32_ULPS)
        corrected = policy + beta * aggregate(k3 * torch.exp(logp - old), mask)
        corrected_gap = max(corrected_gap, abs(float(corrected) - float(expected)))
    assert float(aggregate(k3, mask)) > 1e-4  # the second update has moved off the base
    assert corrected_gap > 1e-5  # the bias-corrected KL would fail the check above

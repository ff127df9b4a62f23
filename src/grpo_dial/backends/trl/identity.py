"""The identity probe on the trl backend: the own probe on TRL's model and TRL's batch.

The own trainer measures the group-std identity (grpo_dial.train.probe, IDENTITY_COLUMNS) every
identity_every steps on the first identity_groups informative groups of the step's batch, with
the policy that sampled it, before the update. The quantities need the score vectors
s_i = grad_theta sum_t log pi(o_it | x, o_i,<t), so they cannot be recovered from TRL's logged
rewards and advantages; they are measured the same way here, by the same function
(`identity_probe`), on the same kind of batch:

- when: TRL samples and scores a step's completions in `_generate_and_score_completions`, once
  per generation batch (steps_per_generation x num_iterations micro-steps: updates_per_batch
  optimizer steps), before the batch's first backward. TRL has no callback between sampling
  and the update (a TrainerCallback's on_step_begin comes before the sampling, on_step_end after
  the update), so `probing_trainer` subclasses GRPOTrainer and runs the probe right after that
  method returns: step = global_step / num_iterations + 1, the policy that sampled the batch,
  on-policy as ours.
- the batch: TRL's prompt ids (left-padded, its prompt mask) and completion ids (right-padded;
  completion mask 1 up to and including EOS, as our response mask) become a `Rollouts`; rows
  g G .. (g + 1) G - 1 are group g (TRL's RepeatSampler puts a prompt's num_generations
  completions next to each other, the order TRL's own `rewards.view(-1, G)` and the responses
  table's group numbers rely on), so `group` joins the responses table's (step, group).
- the rewards: the verifier's 0/1 rewards of that same batch (what TRL's advantages came from).

A translatable dial computes the advantages and the aggregation exactly as TRL does
(tests/train/test_trl_equivalence.py), so the probe's g_agg is the direction TRL's loss takes.
The probe only reads the weights (torch.autograd.grad, no .grad written, no random numbers
drawn): TRL's run is the same with or without it. Its time is left out of wall_seconds, as on
the own backend. A run over several processes (accelerate, ZeRO) holds a slice of the batch and
possibly a shard of the model on each, so the probe runs only in a single-process run.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Callable, Sequence

import pandas as pd
import torch

from grpo_dial.core.dial import Dial
from grpo_dial.policy.rollout import decode_texts
from grpo_dial.policy.rollout.rollouts import Rollouts
from grpo_dial.train.probe import IDENTITY_COLUMNS, identity_probe


def trl_rollouts(
    output: dict, problems: Sequence, group_size: int, eos: set[int], tokenizer
) -> Rollouts:
    """TRL's scored batch (`_generate_and_score_completions`'s output: prompt_ids, prompt_mask,
    completion_ids, completion_mask) as Rollouts; row i answers problems[i]; texts decoded as
    the own sampler's (special tokens kept, EOS dropped)."""
    prompt_ids, completion_ids = output["prompt_ids"], output["completion_ids"]  # (N, P), (N, T)
    mask = output["completion_mask"].long()  # (N, T)
    n = len(completion_ids)
    if n != len(problems) or n % group_size:
        raise ValueError(f"{n} completions for {len(problems)} problems in groups of {group_size}")
    lengths = mask.sum(1).tolist()  # (N,)
    ids = [completion_ids[i, :length].tolist() for i, length in enumerate(lengths)]
    finished = [bool(row) and row[-1] in eos for row in ids]
    text_ids = [row[: len(row) - f] for row, f in zip(ids, finished, strict=True)]  # no EOS
    return Rollouts(
        problems=list(problems),
        group_ids=torch.arange(n, device=completion_ids.device) // group_size,  # (N,)
        prompt_ids=prompt_ids,
        prompt_mask=output["prompt_mask"].long(),
        response_ids=completion_ids,
        response_mask=mask,
        finished=torch.tensor(finished),
        texts=decode_texts(tokenizer, text_ids),
        pad_token_id=tokenizer.pad_token_id or 0,
    )


class IdentityProbe:
    """IDENTITY_COLUMNS rows of a trl run: `measure` on each scored batch (module doc)."""

    def __init__(
        self,
        dial: Dial,
        every: int,
        groups: int,
        group_size: int,
        problems: Sequence,
        rewards: Callable[[], list[float]],
        eos: set[int],
        tokenizer,
        rows: Sequence[dict] = (),
    ) -> None:
        """problems: the dataset's rows (the `idx` column indexes them); rewards(): the
        verifier's rewards of the batch it scored last; rows: those measured before a resume."""
        self.dial, self.every, self.groups, self.group_size = dial, every, groups, group_size
        self.problems, self.rewards, self.eos, self.tokenizer = problems, rewards, eos, tokenizer
        self.rows = list(rows)
        self.seconds: dict[int, float] = defaultdict(float)  # step -> probe wall seconds

    def due(self, step: int) -> bool:
        return bool(self.every) and step % self.every == 0

    def measure(self, model: torch.nn.Module, step: int, inputs: Sequence, output: dict) -> None:
        """Probe the first `groups` informative groups of the batch TRL just scored."""
        t0 = time.perf_counter()
        problems = [self.problems[x["idx"]] for x in inputs]
        batch = trl_rollouts(output, problems, self.group_size, self.eos, self.tokenizer)
        rewards = torch.tensor(self.rewards(), dtype=torch.float32)  # (N,)
        probe = identity_probe(model, batch, rewards, self.dial, self.groups, step)
        self.rows += probe.to_dict("records")
        self.seconds[step] += time.perf_counter() - t0


def identity_table(rows: Sequence[dict]) -> pd.DataFrame:
    """The identity table of probe rows (empty, with its columns, when none were measured)."""
    return pd.DataFrame(list(rows), columns=list(IDENTITY_COLUMNS))


def probing_trainer(base: type) -> type:
    """`base` (GRPOTrainer) whose scored training batches go through `self.identity` (an
    IdentityProbe, or None for no probe) when its step is due."""

    class ProbingTrainer(base):
        identity: IdentityProbe | None = None

        def _generate_and_score_completions(self, inputs):
            output = super()._generate_and_score_completions(inputs)
            # the batch this one is (it is sampled before its first of num_iterations updates)
            step = self.state.global_step // self.args.num_iterations + 1
            if self.identity is not None and self.model.training and self.identity.due(step):
                model = self.accelerator.unwrap_model(self.model)
                self.identity.measure(model, step, inputs, output)
            return output

    return ProbingTrainer

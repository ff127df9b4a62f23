"""One TRL optimizer step of the trl backend's translation, run alone or under `accelerate launch`
(tests/backends/test_trl_processes.py): python trl_processes.py <base dir> <out dir> <dial>.

Completions are a fixed function of (prompt, its occurrence in the group), not sampled, so one
process and N processes train on the same batch; every group is mixed (its first completion is
right, its second unfinished, so wrong), so every rank's share carries a gradient. SGD (the
update is lr x the gradient) so the update compares gradients, which AdamW's first step
(~lr sign g) would hide. Each rank writes rank<r>.json (num_items_in_batch, its tokens, loss,
processes, accelerate's distributed type, the class the trainer wrapped the model in, and where
it ran: RANK, the node rank GROUP_RANK and SLURM's task SLURM_PROCID / job SLURM_JOB_ID when
under srun) and grad<r>.pt: `local`, the gradient of its own loss alone (before DDP's
all-reduce), and `reduced`, the gradient the optimizer stepped on. Rank 0 writes update.pt,
the parameters' change theta' - theta. `assert_same_step` compares a run of N processes with
one (tests/backends/test_trl_processes.py, tests/cluster/test_trl_tasks.py)."""

from __future__ import annotations

import itertools
import json
import os
import random
import sys
import warnings
import zlib
from pathlib import Path

import torch

TRAIN = {"steps": 1, "prompts_per_step": 4, "group_size": 4, "max_new_tokens": 6, "lr": 0.5,
         "optimizer": "sgd", "grad_clip": None, "seed": 7}  # fmt: skip
DIALS = {
    "dapo": {"preset": "dapo", "silent": "keep", "std_ddof": 1, "eps": 1e-4},
    "grpo": {"preset": "grpo", "std_ddof": 1, "eps": 1e-4},
}


def problems() -> list:
    """16 distinct prompts of the fake task (tests/_rl_fixtures.FakeTask), hard / easy in turn."""
    from grpo_dial.data.tasks.base import Problem

    texts = ["".join(t) for t in itertools.product("abc", repeat=3)][:16]
    return [Problem(f"p{i}", t, "abc" if i % 2 else "a", "easy" if i % 2 else "hard")
            for i, t in enumerate(texts)]  # fmt: skip


def completion(prompt_ids: list[int], occurrence: int, letters: list[int], eos: int) -> list[int]:
    """1-6 tokens drawn from a generator seeded by the prompt and the occurrence; ends in EOS
    (finished) with probability 0.7, but the group's first completion starts with 'a' and
    finishes (right on every prompt) and its second does not finish (wrong): every group is
    mixed."""
    seed = zlib.crc32(json.dumps([list(prompt_ids), occurrence]).encode())
    rng = random.Random(seed)
    n = rng.randint(2, TRAIN["max_new_tokens"])
    finished = {0: True, 1: False}.get(occurrence, rng.random() < 0.7)
    body = [rng.choice(letters) for _ in range(n - finished)]
    if occurrence == 0:
        body[0] = letters[0]  # 'a': right on hard and easy prompts alike
    return body + [eos] * finished


def main(base: str, out: str, dial_name: str) -> None:
    from datasets import Dataset
    from transformers import TrainerCallback
    from transformers.trainer_callback import PrinterCallback
    from trl import GRPOConfig, GRPOTrainer

    from grpo_dial.backends.trl.config import grpo_config_kwargs
    from grpo_dial.backends.trl.run import make_reward, prompt_column
    from grpo_dial.core.dial import dial_from_config
    from grpo_dial.policy.model import load_policy

    sys.path.insert(0, str(Path(__file__).parents[1]))
    from _rl_fixtures import FakeTask

    torch.set_num_threads(1)
    processes = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    model, tokenizer = load_policy(base, "cpu", "float32")
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    eos = tokenizer.eos_token_id
    letters = [tokenizer.convert_tokens_to_ids(c) for c in "abc"]
    pool = problems()
    seen: list[dict] = []
    grads = {"local": {}, "reduced": {}}  # name -> gradient, summed over micro-batches

    class Fixed(GRPOTrainer):
        def _generate_single_turn(self, prompt_ids, images, multimodal_fields, num_generations,
                                  has_tool_images=False):  # fmt: skip
            count: dict[tuple, int] = {}
            out = []
            for p in prompt_ids:
                j = count.get(tuple(p), 0)
                count[tuple(p)] = j + 1
                out.append(completion(p, j, letters, eos))
            return out, None

        def _compute_loss(self, model, inputs):
            loss = super()._compute_loss(model, inputs)
            # this rank's own gradient: autograd.grad runs no AccumulateGrad, so DDP's hooks
            # (the all-reduce) do not fire; the trainer's backward then runs as ever
            named = list(self.accelerator.unwrap_model(model).named_parameters())
            local = torch.autograd.grad(loss, [p for _, p in named], retain_graph=True,
                                        allow_unused=True)  # fmt: skip
            for (name, p), g in zip(named, local, strict=True):
                g = torch.zeros_like(p) if g is None else g.detach()
                grads["local"][name] = grads["local"].get(name, 0) + g
            seen.append({
                "num_items_in_batch": float(inputs["num_items_in_batch"]),
                "tokens": float(inputs["completion_mask"].sum()),
                "rows": len(inputs["completion_mask"]),
                "loss": float(loss.detach()),
            })  # fmt: skip
            return loss

    class Reduced(TrainerCallback):
        def on_pre_optimizer_step(self, args, state, control, **_):
            for name, p in trainer.accelerator.unwrap_model(trainer.model).named_parameters():
                grads["reduced"][name] = p.grad.detach().clone()

    dial = dial_from_config(DIALS[dial_name])
    args = GRPOConfig(
        output_dir=str(Path(out) / "trl"), use_cpu=True, report_to="none", save_strategy="no",
        logging_steps=1, disable_tqdm=True, dataloader_num_workers=0,
        **grpo_config_kwargs(dial, TRAIN, processes),
    )  # fmt: skip
    data = Dataset.from_dict({"prompt": prompt_column(tokenizer, pool), "idx": list(range(16))})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        trainer = Fixed(
            model=model, reward_funcs=make_reward(FakeTask(), pool, {eos}), args=args,
            train_dataset=data, processing_class=tokenizer,
        )  # fmt: skip
        trainer.remove_callback(PrinterCallback)
        trainer.add_callback(Reduced())
        trainer.train()
    backend = torch.distributed.get_backend() if torch.distributed.is_initialized() else None
    record = {"processes": processes, "rank": rank, "backend": backend, "steps": seen,
              "distributed_type": str(trainer.accelerator.distributed_type),
              "model_class": type(trainer.model_wrapped).__name__,
              "process_index": trainer.accelerator.process_index,
              "node_rank": os.environ.get("GROUP_RANK"),  # torchrun's node (machine) rank
              "slurm_task": os.environ.get("SLURM_PROCID"),
              "slurm_job": os.environ.get("SLURM_JOB_ID")}  # fmt: skip
    Path(out, f"rank{rank}.json").write_text(json.dumps(record), encoding="utf-8")
    torch.save(grads, Path(out) / f"grad{rank}.pt")
    after = trainer.accelerator.unwrap_model(trainer.model).named_parameters()
    # a sharded (FSDP2) parameter is a DTensor: full_tensor() gathers it, a collective on every rank
    after = {n: p.full_tensor() if hasattr(p, "full_tensor") else p for n, p in after}
    if rank == 0:
        update = {n: (p.detach() - before[n]) for n, p in after.items()}
        torch.save(update, Path(out) / "update.pt")


def assert_same_step(one: str | Path, many: str | Path, processes: int = 2) -> None:
    """The run in `many` (`processes` ranks over gloo) took the one-process run's step in `one`:
    the same global token count num_items_in_batch on every rank, whose token counts split it;
    every rank's share informative (its loss and its own gradient non-zero); DAPO's normalizer
    (rank r divides its token sum by num_items_in_batch / N, DDP averages: the token mean over
    the batch), so the ranks' mean loss is the one process's; the gradient every rank stepped on
    (DDP's all-reduce) is the mean of the ranks' own gradients and equals the one process's;
    the update is -lr x that gradient (SGD) and the one process's update, to float tolerance."""
    import pytest

    (single,) = json.loads(Path(one, "rank0.json").read_text())["steps"]
    ranks = [json.loads(Path(many, f"rank{r}.json").read_text()) for r in range(processes)]
    assert [r["processes"] for r in ranks] == [processes] * processes
    assert [(r["rank"], r["process_index"]) for r in ranks] == [(i, i) for i in range(processes)]
    assert {r["backend"] for r in ranks} == {"gloo"}
    shares = [r["steps"][0] for r in ranks]  # one optimizer step each
    rows = single["rows"]
    assert [s["rows"] for s in shares] == [rows // processes] * processes
    tokens = single["tokens"]
    assert single["num_items_in_batch"] == tokens > 0
    assert [s["num_items_in_batch"] for s in shares] == [tokens] * processes
    assert sum(s["tokens"] for s in shares) == tokens
    assert all(abs(s["loss"]) > 1e-3 for s in shares), shares  # no rank's share is silent
    assert sum(s["loss"] for s in shares) / processes == pytest.approx(single["loss"], abs=1e-6)

    def norm(grad: dict) -> float:
        return float(torch.sqrt(sum((g.double() ** 2).sum() for g in grad.values())))

    alone = torch.load(Path(one, "grad0.pt"))
    grads = [torch.load(Path(many, f"grad{r}.pt")) for r in range(processes)]
    assert norm(alone["local"]) > 1e-3
    assert all(norm(g["local"]) > 1e-3 for g in grads), [norm(g["local"]) for g in grads]
    names = alone["local"].keys()
    for name in names:
        mean = sum(g["local"][name] for g in grads) / processes  # the ranks' own, summed / N
        for g in grads:  # the all-reduced gradient, on every rank
            torch.testing.assert_close(g["reduced"][name], mean, atol=1e-6, rtol=1e-4, msg=name)
        torch.testing.assert_close(mean, alone["local"][name], atol=1e-6, rtol=1e-4, msg=name)
        torch.testing.assert_close(alone["reduced"][name], alone["local"][name], msg=name)
    a = torch.load(Path(one, "update.pt"))
    b = torch.load(Path(many, "update.pt"))
    assert a.keys() == b.keys() == names
    assert max(float(v.abs().max()) for v in a.values()) > 1e-3
    for name in a:
        step = -TRAIN["lr"] * grads[0]["reduced"][name]  # SGD, no decay, no clipping
        torch.testing.assert_close(b[name], step, atol=1e-6, rtol=1e-4, msg=name)
        torch.testing.assert_close(b[name], a[name], atol=1e-6, rtol=1e-4, msg=name)


if __name__ == "__main__":
    main(*sys.argv[1:4])

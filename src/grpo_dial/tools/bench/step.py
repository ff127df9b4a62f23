"""Our step against TRL's GRPOTrainer step, interleaved in one process.

Both sides get the same model weights (a deep copy each), tokenizer, prompt pool and settings
(grpo_dial.tools.bench.workload). TRL's step is one GRPOTrainer optimizer step, from
on_step_begin to on_step_end of a callback; that callback then runs one of ours (the trainer's
own step, grpo_dial.tools.bench.ours), so the two alternate and share the machine's state.
Rewards on both sides come from the task's verifier; the dial is TRL's default GRPO
(scale_rewards='group': sample std, eps 1e-4; loss_type 'grpo'), beta 0.

Split: generation (generate_groups / GRPOTrainer._generate), scoring (score /
_calculate_rewards), training = the rest. Memory: grpo_dial.tools.bench.memory, in one extra,
untimed step of each side after the timed ones (the profiler slows them).
"""

from __future__ import annotations

import copy
import tempfile
import time
import warnings

from grpo_dial.tools.bench.memory import PeakMemory
from grpo_dial.tools.bench.ours import make_our_step
from grpo_dial.tools.bench.timing import SideTimes, wrap_method
from grpo_dial.tools.bench.workload import StepSettings, build_setup


def trl_args(settings: StepSettings, out_dir: str, max_steps: int):
    """GRPOConfig matching our step: one optimizer step per batch of prompts x G completions,
    no KL, constant lr, fp32, nothing logged or saved."""
    from trl import GRPOConfig

    return GRPOConfig(
        output_dir=out_dir,
        per_device_train_batch_size=settings.prompts * settings.group_size,  # completions
        num_generations=settings.group_size,
        max_completion_length=settings.max_new_tokens,
        temperature=settings.temperature,
        top_p=1.0,
        top_k=0,
        beta=0.0,
        loss_type="grpo",
        scale_rewards="group",
        num_iterations=1,
        learning_rate=settings.lr,
        lr_scheduler_type="constant",
        warmup_steps=0,
        weight_decay=0.0,
        max_grad_norm=settings.grad_clip,
        optim="adamw_torch",
        bf16=False,
        fp16=False,
        gradient_checkpointing=False,
        max_steps=max_steps,
        logging_steps=10**6,
        save_strategy="no",
        report_to="none",
        disable_tqdm=True,
        use_cpu=settings.device == "cpu",
        seed=settings.seed,
        dataloader_num_workers=0,
        log_completions=False,
    )


def run_step_bench(
    settings: StepSettings, steps: int, warmup: int, progress: bool = True
) -> dict[str, dict[str, float]]:
    """Interleaved timing of our step and TRL's: {"ours": summary, "trl": summary}.

    TRL's trainer runs warmup + steps + 1 optimizer steps; after each, a callback runs one of
    ours. The first `warmup` of each are not timed; the last one of each measures memory.
    """
    try:
        from datasets import Dataset
        from transformers import TrainerCallback
        from transformers.trainer_callback import PrinterCallback
        from trl import GRPOTrainer
    except ImportError as error:
        raise ValueError(f"the bench needs TRL: pip install -e .[bench] ({error})") from None
    from tqdm.auto import tqdm

    setup = build_setup(settings, progress=progress)
    trl_model = copy.deepcopy(setup.model)
    ours = make_our_step(setup, settings)
    problems = setup.pool
    eos = set(setup.eos_ids)
    trl_tokens: list[int] = []

    def reward(prompts, completions, completion_ids, idx, **_):
        trl_tokens.append(sum(len(c) for c in completion_ids))
        return [
            float(setup.task.verify(problems[i], text, bool(ids) and ids[-1] in eos).correct)
            for i, text, ids in zip(idx, completions, completion_ids, strict=True)
        ]

    data = Dataset.from_dict(
        {"prompt": [p.prompt for p in problems], "idx": list(range(len(problems)))}
    )
    total = warmup + steps + 1
    times = {"ours": SideTimes(), "trl": SideTimes()}
    bar = tqdm(total=total, desc=f"bench {settings.workload}", disable=not progress)

    class Interleave(TrainerCallback):
        def on_step_begin(self, args, state, control, **kwargs):
            self.sink: dict[str, float] = {}
            trl_tokens.clear()
            self.memory = PeakMemory(settings.device) if state.global_step == total - 1 else None
            if self.memory:
                self.memory.start()
            self.t0 = time.perf_counter()

        def on_step_end(self, args, state, control, **kwargs):
            elapsed = time.perf_counter() - self.t0
            k = state.global_step  # 1-based after the step
            if self.memory is not None:
                times["trl"].peak_bytes = self.memory.stop()
                mem = PeakMemory(settings.device)
                mem.start()
                ours()
                times["ours"].peak_bytes = mem.stop()
            else:
                mine = ours()
                if k > warmup:
                    times["trl"].add(
                        {
                            "total": elapsed,
                            "generation": self.sink.get("_generate", 0.0),
                            "scoring": self.sink.get("_calculate_rewards", 0.0),
                            "tokens": sum(trl_tokens),
                        }
                    )
                    times["ours"].add(mine)
            bar.update(1)

    callback = Interleave()
    with tempfile.TemporaryDirectory() as out_dir, warnings.catch_warnings():
        # transformers renames gradient_checkpointing; TRL still sets it (to False here)
        warnings.filterwarnings("ignore", "`(is_)?gradient_checkpointing", FutureWarning)
        trainer = GRPOTrainer(
            model=trl_model,
            reward_funcs=reward,
            args=trl_args(settings, out_dir, total),
            train_dataset=data,
            processing_class=setup.tokenizer,
            callbacks=[callback],
        )
        for name in ("_generate", "_calculate_rewards"):
            wrap_method(trainer, name, lambda: callback.sink)
        trainer.remove_callback(PrinterCallback)  # it prints the final metrics to stdout
        trainer.train()
    bar.close()
    return {side: t.summary() for side, t in times.items()}

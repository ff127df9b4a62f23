"""The trl backend of the `train` rule: one arm and seed trained by TRL's GRPOTrainer.

Same prompts (the task's training pool, task.problems('train', train_pool, pool_seed)), same
held-out set, same base policy (float32 weights) and seed as the own trainer; the dial and the
train section become a GRPOConfig (grpo_dial.backends.trl.config, which refuses what TRL cannot
express). The reward is the task's own verifier (`verify(problem, text, finished)`, finished =
the completion ends in an EOS id; the math task's math-verify under its time limit), one TRL
reward function named `verifier`, which also logs (log_extra) the problem's prompt_id, the
completion's tokens, truncation and the task's work / redundant split. TRL logs every completion
(log_completions, logging_steps 1); grpo_dial.backends.trl.tables turns the log into the own
trainer's steps / responses / mass / allocation tables. Held-out evaluation is the own
trainer's `evaluate` on the trainer's model (step 0, every eval_every steps, the last). The
identity probe is the own trainer's, on TRL's model and batch right after TRL scores it
(grpo_dial.backends.trl.identity; single-process runs).

Resume: TRL checkpoints (output_dir `<checkpoint_dir>/trl/checkpoint-<step>`, every
checkpoint_every steps) hold model, optimizer, scheduler and RNG states; the evaluations, identity
rows and wall times so far are saved beside them (records.json). A run starts from the newest
checkpoint when `<checkpoint_dir>/trl/run_key.json` equals this run's key (train config but the
free fields, the dial, prompts, base model, TRL's version); another key is moved aside to
`trl-superseded-<UTC time>` with the changed keys in the log (train.resume auto) or stops the
run (strict), as the own backend does with its checkpoint.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict
from pathlib import Path

import pandas as pd

from grpo_dial.backends.trl.config import batch_of, grpo_config_kwargs
from grpo_dial.core.dial import Dial
from grpo_dial.data.tasks.base import Task
from grpo_dial.train.config import TrainConfig

log = logging.getLogger("grpo_dial")
RECORDS = "records.json"  # evaluations, identity rows, wall seconds so far, per checkpoint
KEY = "run_key.json"


def run_key(config: TrainConfig, dial: Dial, pool, heldout, base) -> dict:
    """What a TRL checkpoint must match to be resumed (train.steps may grow)."""
    import trl

    from grpo_dial.train import checkpoint

    ids = "\n".join(p.prompt_id for p in [*pool, *heldout]).encode()
    return json.loads(
        json.dumps(
            {
                "config": config.resume_key(),
                "dial": dial.as_dict(),
                "prompts": hashlib.sha1(ids).hexdigest(),
                "base_model": checkpoint.model_fingerprint(base),
                "trl": trl.__version__,
            },
            default=str,
        )
    )


def open_run_dir(run_dir: Path, key: dict, mode: str, steps: int, updates: int = 1) -> str | None:
    """The checkpoint folder to resume from, or None to start afresh; another run's folder is
    moved aside (auto) or stops the run (strict), never overwritten. steps: the own trainer's
    (batches); a checkpoint's number is TRL's optimizer step, `updates` of them per batch."""
    from transformers.trainer_utils import get_last_checkpoint

    from grpo_dial.train.resume import key_changes

    key_file = run_dir / KEY
    if run_dir.is_dir() and key_file.is_file():
        old = json.loads(key_file.read_text(encoding="utf-8"))
        changes = key_changes(old, key)
        last = get_last_checkpoint(str(run_dir))
        done = batch_of(int(last.rsplit("-", 1)[1]), updates) if last else 0
        if done > steps:
            changes.append(f"train.steps: {done} already done, {steps} asked")
        if not changes:
            return last
        why = "belongs to another run (" + "; ".join(changes) + ")"
        if mode == "strict":
            raise ValueError(
                f"TRL checkpoint folder {run_dir} {why}; to keep it aside and start afresh rerun "
                "with --config 'train={resume: auto}'"
            )
        stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
        aside = run_dir.with_name(f"trl-superseded-{stamp}")
        os.replace(run_dir, aside)
        log.warning("TRL checkpoint folder %s %s; kept as %s, starting afresh", run_dir, why, aside)
    elif run_dir.is_dir():  # no key: a run killed before its first write; nothing to keep
        import shutil

        shutil.rmtree(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    key_file.write_text(json.dumps(key, indent=1, sort_keys=True), encoding="utf-8")
    return None


def make_reward(task: Task, pool: list, eos: set[int]) -> Callable:
    """TRL reward function: the task's verifier on each completion (1.0 correct, else 0.0),
    logging the columns trl_tables.EXTRA and the problem's difficulty; `verifier.last` holds
    the rewards of the batch it scored last (the identity probe's)."""

    def verifier(prompts, completions, completion_ids, idx, log_extra=None, **_):
        problems = [pool[i] for i in idx]
        finished = [bool(ids) and ids[-1] in eos for ids in completion_ids]
        texts = [c if isinstance(c, str) else c[-1]["content"] for c in completions]
        verdicts = [task.verify(p, t, f) for p, t, f in zip(problems, texts, finished, strict=True)]
        splits = [task.length_split(p, t) for p, t in zip(problems, texts, strict=True)]
        if log_extra is not None:
            nan = float("nan")
            columns = {
                "problem_id": [p.prompt_id for p in problems],
                "difficulty": [str(p.difficulty) for p in problems],
                "tokens": [len(ids) for ids in completion_ids],
                "truncated": [bool(v.truncated) for v in verdicts],
                "task_work": [nan if s is None else float(s.work) for s in splits],
                "task_redundant": [nan if s is None else float(s.redundant) for s in splits],
            }
            for name, values in columns.items():
                log_extra(name, values)
        verifier.last = [float(v.correct) for v in verdicts]
        return verifier.last

    verifier.last = []
    return verifier


def prompt_column(tokenizer, problems: list) -> list:
    """Each problem's prompt as the own sampler encodes it: a user turn through the chat
    template when the tokenizer has one (TRL renders conversational prompts with
    add_generation_prompt), else the text (TRL's tokenizer call adds bos as ours does)."""
    from grpo_dial.data.prompting import has_chat_template

    if has_chat_template(tokenizer):
        return [[{"role": "user", "content": p.prompt}] for p in problems]
    return [p.prompt for p in problems]


def trl_train(
    base_model_dir: str | Path,
    task: Task,
    dial: Dial,
    config: TrainConfig,
    outputs: Mapping[str, str | Path],
    checkpoint_dir: str | Path,
    pass_rates: pd.DataFrame | None = None,
    launch: Mapping | None = None,
    callback: Callable[[int], None] | None = None,
) -> None:
    """Train `dial` with TRL's GRPOTrainer and write the own trainer's tables (module doc).
    launch: {vllm: auto|off, vllm_gpu_memory_utilization}; callback(step) after each step's
    checkpoint (tests interrupt a run by raising in it)."""
    import warnings

    from datasets import Dataset
    from transformers import TrainerCallback
    from transformers.trainer_callback import PrinterCallback
    from trl import GRPOConfig, GRPOTrainer

    from grpo_dial.backends.trl import tables as trl_tables
    from grpo_dial.backends.trl.identity import IdentityProbe, identity_table, probing_trainer
    from grpo_dial.backends.trl.settings import launch_settings
    from grpo_dial.policy.model import autocast, load_policy
    from grpo_dial.policy.rollout import eos_ids
    from grpo_dial.tables import write_table
    from grpo_dial.train import records as rec
    from grpo_dial.train.step import evaluate

    launch = launch_settings(launch)
    model, tokenizer = load_policy(
        str(base_model_dir), config.device, "float32", config.attn_implementation,
        config.gradient_checkpointing,
    )  # fmt: skip
    pool = task.problems("train", config.train_pool, config.pool_seed)
    heldout = task.problems("heldout", config.heldout_prompts, config.pool_seed)
    bands, vocab = rec.band_map(
        [p.prompt_id for p in pool], [p.difficulty for p in pool], pass_rates
    )
    run_dir = Path(checkpoint_dir) / "trl"
    key = run_key(config, dial, pool, heldout, model)
    updates = config.updates_per_batch  # TRL's optimizer steps per batch (num_iterations)
    resume_from = open_run_dir(run_dir, key, config.resume, config.steps, updates)
    saved = {"evals": [], "walls": {}, "identity": []}
    if resume_from is not None:
        saved = json.loads((Path(resume_from) / RECORDS).read_text(encoding="utf-8"))
        log.info("resuming the TRL run from %s", resume_from)
    walls = {int(k): v for k, v in saved["walls"].items()}
    evals = list(saved["evals"])
    kwargs = grpo_config_kwargs(dial, asdict(config), int(os.environ.get("WORLD_SIZE", "1")))
    device = str(config.device)
    use_vllm = launch["vllm"] == "auto" and device.startswith("cuda")
    if use_vllm:
        import importlib.util

        use_vllm = importlib.util.find_spec("vllm") is not None
    args = GRPOConfig(
        output_dir=str(run_dir),
        **kwargs,
        use_cpu=device == "cpu",
        use_vllm=use_vllm,
        vllm_mode="colocate",
        vllm_gpu_memory_utilization=launch["vllm_gpu_memory_utilization"],
        gradient_checkpointing=config.gradient_checkpointing,
        logging_steps=1,
        log_completions=True,
        num_completions_to_print=0,
        save_strategy="steps",
        save_steps=config.checkpoint_every * updates,  # after a batch's last update
        save_total_limit=2,
        report_to="none",
        disable_tqdm=not config.progress,
        dataloader_num_workers=0,
    )

    # Several processes (accelerate, ZeRO): one process cannot run the sharded model alone, so
    # the base and the final policy are evaluated on the main process after training.
    sharded = int(os.environ.get("WORLD_SIZE", "1")) > 1
    eos = set(eos_ids(model, tokenizer))
    reward = make_reward(task, pool, eos)
    probe = None
    if config.identity_every and sharded:
        log.warning("identity probe skipped: it runs in a single-process run only")
    elif config.identity_every:
        probe = IdentityProbe(
            dial, config.identity_every, config.identity_groups, config.group_size, pool,
            lambda: reward.last, eos, tokenizer, rows=saved.get("identity", []),
        )  # fmt: skip

    def run_eval(model_now, step: int) -> None:
        with autocast(config.precision, device):
            evals.append(evaluate(model_now, tokenizer, task, heldout, config, step))

    class Records(TrainerCallback):
        def on_train_begin(self, args, state, control, model=None, **_):
            if state.global_step == 0 and not evals and not sharded:
                run_eval(model, 0)

        def on_step_begin(self, args, state, control, **_):
            if state.global_step % updates == 0:  # a batch's first update: it samples first
                self.t0 = time.perf_counter()

        def on_step_end(self, args, state, control, model=None, **_):
            if state.global_step % updates:  # the batch has updates left
                return
            step = state.global_step // updates
            probing = probe.seconds.pop(step, 0.0) if probe is not None else 0.0
            walls[step] = time.perf_counter() - self.t0 - probing  # without the probe, as ours
            last = step == config.steps
            if (last or step % config.eval_every == 0) and not sharded:
                run_eval(model, step)

        def on_save(self, args, state, control, **_):
            step = batch_of(state.global_step, updates)
            if state.is_world_process_zero:
                folder = Path(args.output_dir) / f"checkpoint-{state.global_step}"
                records = {
                    "evals": evals,
                    "walls": {str(k): v for k, v in walls.items()},
                    "identity": [] if probe is None else probe.rows,
                }
                (folder / RECORDS).write_text(json.dumps(records), encoding="utf-8")
            if callback is not None:
                callback(step)

    data = Dataset.from_dict(
        {"prompt": prompt_column(tokenizer, pool), "idx": list(range(len(pool)))}
    )
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "`(is_)?gradient_checkpointing", FutureWarning)
        trainer = probing_trainer(GRPOTrainer)(
            model=model, reward_funcs=reward, args=args, train_dataset=data,
            processing_class=tokenizer, callbacks=[Records()],
        )  # fmt: skip
        trainer.identity = probe
        trainer.remove_callback(PrinterCallback)
        trainer.train(resume_from_checkpoint=resume_from)
    if "model" in outputs:
        trainer.save_model(str(outputs["model"]))
    if not trainer.is_world_process_zero():
        return
    if sharded and "model" in outputs:
        for source, step in ((base_model_dir, 0), (outputs["model"], config.steps)):
            run_eval(load_policy(str(source), device, "float32")[0].eval(), step)
    imported = trl_tables.import_completions(run_dir, config.group_size)
    responses = trl_tables.responses_table(imported, updates)
    tables = trl_tables.run_tables(
        responses, dial, trainer.state.log_history, walls, bands, vocab, updates
    )
    tables["responses"] = responses
    tables["evals"] = rec.to_frames({"evals": evals}, {"evals": rec.EVAL_COLUMNS})["evals"]
    tables["identity"] = identity_table([] if probe is None else probe.rows)
    for name, path in outputs.items():
        if name != "model":
            write_table(tables[name], path)

"""The device check's training parts: the GPU lock, real `train_run` steps (5), a TRL step (6).

5. `claim`: `resolve_device("cuda")` as every GPU job calls it: the device it returns, the lock
   file it holds, the pid written in it, and a second process refused the same GPU.
   `train_runs`: a char-level Llama warm-started for a few seconds on the arithmetic task's
   terse demonstrations (`policy.warm_start`; two one-digit operands, so a sampled group is
   often mixed), saved, then `train_run` for two steps from it with every preset
   (core.dial.PRESETS: grpo, dr_grpo, dapo with refill, lambda_grpo, hadw_grpo,
   stratified_grpo) and with GRPO plus KL to the base, in config/gpu.yaml's precision; each step's
   loss, gradient norm, accuracy, mixed-group share, resampled prompts, and the run's seconds.
   Then the same GRPO run stopped after step 1 and resumed from its checkpoint to step 2,
   compared with the uninterrupted one: its step table and its final weights.
6. `trl_step`: one `trl.GRPOTrainer` step on the same warm-started model and task, if trl and
   datasets import (else skipped with the import error).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import torch

from grpo_dial.tools.device_env import Device, Shapes, put

KL_COEF = 0.05
STEP_FIELDS = ("accuracy", "loss", "grad_norm", "kl", "silent_fraction", "resampled_prompts",
               "trained_groups", "samples", "nonfinite")  # fmt: skip


class Skip(Exception):  # noqa: N818 - a check that does not apply here, with its reason
    """Raised by a check that does not apply on this machine; its message is the reason."""


def claim(device: str, lock_dir: Path) -> tuple[str, dict]:
    """(the device to run on, the lock report). A bare "cuda" is resolved through
    `policy.devices.resolve_device` with its locks in `lock_dir`."""
    from grpo_dial.policy import devices

    out: dict = {"asked": device, "lock_dir": str(lock_dir)}
    why = f"the check runs on {device!r}; only a bare 'cuda' is resolved and locked"
    if device != "cuda":
        if not torch.cuda.is_available():  # what a GPU job gets on a machine without one
            try:
                devices.resolve_device("cuda", lock_dir)
                out["no_gpu_message"] = "resolve_device('cuda') returned without a GPU"
            except ValueError as error:
                out["no_gpu_message"] = str(error)
        for key in ("resolved", "lock_file", "holder_pid_matches", "second_process_refused"):
            put(out, key, None, why)
        return device, out
    resolved = devices.resolve_device("cuda", lock_dir)
    out["resolved"] = resolved
    held = [Path(p) for p in devices._HELD if Path(p).parent == lock_dir.resolve()]
    if not held:
        why = "one visible GPU without a UUID: nothing to choose, no lock is taken (by design)"
        for key in ("lock_file", "holder_pid_matches", "second_process_refused"):
            put(out, key, None, why)
        return resolved, out
    out["lock_file"] = str(held[0])
    out["holder_pid_matches"] = devices.holder(held[0]) == str(os.getpid())
    ident = held[0].name.removeprefix("gpu-").removesuffix(".lock")
    out["second_process_refused"], out["second_process_says"] = second_claim(ident, lock_dir)
    return resolved, out


def second_claim(ident: str, lock_dir: Path) -> tuple[bool, str]:
    """(refused, what it said): another process trying to claim GPU `ident` at once."""
    code = (
        "import sys; from grpo_dial.policy.devices import claim_index\n"
        "try:\n    claim_index([sys.argv[1]], sys.argv[2], timeout=0)\n"
        "except ValueError as e:\n    print(e); sys.exit(3)\n"
    )
    src = str(Path(__file__).resolve().parents[2])
    env = {**os.environ, "PYTHONPATH": src + os.pathsep + os.environ.get("PYTHONPATH", "")}
    done = subprocess.run([sys.executable, "-c", code, ident, str(lock_dir)], env=env,
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    return done.returncode == 3 and "claimed" in done.stdout, (done.stdout + done.stderr)[-300:]


def arithmetic_policy(device: Device, tiny: bool, directory: Path) -> tuple[object, dict]:
    """(the task, a report): a char-level Llama warm-started on two one-digit operands' terse
    demonstrations, saved to `directory`."""
    from grpo_dial.data.tasks import get_task
    from grpo_dial.policy.model import (
        PolicySpec,
        build_char_tokenizer,
        build_tiny_llama,
        save_policy,
    )
    from grpo_dial.policy.warm_start import WarmStartConfig, warm_start

    task = get_task("arithmetic", operands=2, digits=1)
    tokenizer = build_char_tokenizer(task.alphabet)
    spec = PolicySpec(n_layers=1, hidden_size=64, n_heads=2, intermediate_size=128,
                      max_position_embeddings=64) if tiny else PolicySpec()  # fmt: skip
    model = build_tiny_llama(spec, tokenizer, seed=0).to(device.name)
    steps, batch, lr = (60, 32, 5e-3) if tiny else (300, 64, 3e-3)
    config = WarmStartConfig(
        steps=steps, batch_size=batch, lr=lr, warmup_steps=10, corpus_size=2000,
        style_weights={"terse": 1.0}, progress=False,
    )  # fmt: skip
    t0 = time.perf_counter()
    curve = warm_start(task, model, tokenizer, config)
    save_policy(model.cpu(), tokenizer, directory)
    report = {"layers": spec.n_layers, "hidden": spec.hidden_size, "warm_start_steps": steps,
              "warm_start_seconds": round(time.perf_counter() - t0, 2),
              "warm_start_final_loss": round(float(curve["loss"].iloc[-1]), 4)}  # fmt: skip
    return task, report


def _config(shapes: Shapes, device: Device, steps: int, **extra):
    from grpo_dial.train.config import TrainConfig

    g = 4 if shapes.tiny else shapes.group_size
    return TrainConfig(
        steps=steps, prompts_per_step=4 if shapes.tiny else 8, group_size=g, max_new_tokens=8,
        lr=1e-4, train_pool=32, heldout_prompts=8, eval_every=0, eval_samples=0,
        checkpoint_every=1, identity_every=2, identity_groups=1, device=device.name,
        precision=shapes.precision, micro_batch=2 * g, progress=False, **extra,
    )  # fmt: skip


def _run(base: Path, task, name: str, dial, config, where: Path, model: bool = False) -> dict:
    """train_run into `where`; its step table (as lists) and, with `model`, the final weights."""
    import pandas as pd

    from grpo_dial.train.loop import train_run

    outputs = {"steps": where / "steps.parquet"}
    if model:
        outputs["model"] = where / "model"
    t0 = time.perf_counter()
    train_run(base, task, dial, config, outputs, where / "checkpoint")
    table = pd.read_parquet(outputs["steps"])
    return {"seconds": round(time.perf_counter() - t0, 2), "table": table}


def _steps(table) -> list[dict]:
    rows = []
    for _, row in table.iterrows():
        entry = {}
        for key in STEP_FIELDS:
            value = row.get(key)
            value = None if value is None or value != value else float(value)  # NaN -> None
            put(entry, key, value, "not defined for this run (e.g. no KL, no mixed group)")
        entry["mixed_fraction"] = None if entry["silent_fraction"] is None else round(
            1.0 - entry["silent_fraction"], 4)  # fmt: skip
        if entry["mixed_fraction"] is None:
            entry.setdefault("null", {})["mixed_fraction"] = "no silent fraction recorded"
        rows.append(entry)
    return rows


def train_runs(shapes: Shapes, device: Device, work: Path, check) -> dict:
    """Every preset and GRPO with KL for two steps, and the resume comparison; `check(name,
    fn)` records each part on its own (a failing preset does not stop the others)."""
    from grpo_dial.core.dial import PRESETS

    base = work / "policy"
    task, report = arithmetic_policy(device, shapes.tiny, base)
    out: dict = {"policy": report, "presets": {}}
    runs = {name: (dial, {}) for name, dial in PRESETS.items()}
    runs["grpo_kl"] = (PRESETS["grpo"], {"kl_coef": KL_COEF})
    tables = {}

    def one(name, dial, extra):
        got = _run(base, task, name, dial, _config(shapes, device, 2, **extra), work / name,
                   model=name == "grpo")  # fmt: skip
        tables[name] = got["table"]
        return {"seconds": got["seconds"], "steps": _steps(got["table"])}

    for name, (dial, extra) in runs.items():
        out["presets"][name] = check(name, lambda n=name, d=dial, e=extra: one(n, d, e))

    def resumed():
        if "grpo" not in tables:
            raise Skip("the uninterrupted grpo run failed; nothing to compare with")
        where, dial = work / "grpo_resumed", PRESETS["grpo"]
        _run(base, task, "grpo", dial, _config(shapes, device, 1), where)
        second = _run(base, task, "grpo", dial, _config(shapes, device, 2), where, model=True)
        return compare_runs(tables["grpo"], second["table"], work / "grpo" / "model",
                            where / "model")  # fmt: skip

    out["resume"] = check("resume", resumed)
    return out


def compare_runs(table_a, table_b, model_a: Path, model_b: Path) -> dict:
    """The uninterrupted and the resumed run: step tables (every column but wall time) and
    final weights."""
    import numpy as np
    from safetensors.torch import load_file

    differ = [c for c in table_a.columns if c != "wall_seconds" and not (
        len(table_a) == len(table_b) and np.array_equal(
            table_a[c].to_numpy(dtype=float), table_b[c].to_numpy(dtype=float), equal_nan=True)
    )]  # fmt: skip
    wa = load_file(str(model_a / "model.safetensors"))
    wb = load_file(str(model_b / "model.safetensors"))
    diff = max(float((wa[k].float() - wb[k].float()).abs().max()) for k in wa)
    return {"steps_compared": len(table_a), "step_tables_equal": not differ,
            "columns_that_differ": differ,
            "weights_max_abs_diff": diff, "weights_bitwise_equal": diff == 0.0}  # fmt: skip


def trl_step(shapes: Shapes, device: Device, work: Path) -> dict:
    """One GRPOTrainer step (trl) on the warm-started policy and the arithmetic task."""
    try:
        import trl
        from datasets import Dataset
    except ImportError as error:
        raise Skip(f"trl / datasets not importable here ({error})") from None
    from grpo_dial.data.tasks import get_task
    from grpo_dial.policy.model import load_policy

    base = work / "policy"
    if not (base / "config.json").exists():
        raise Skip("no warm-started policy (the train_run part failed before saving it)")
    task = get_task("arithmetic", operands=2, digits=1)
    problems = {p.prompt: p for p in task.problems("train", 8, 0)}
    model, tokenizer = load_policy(str(base), device=device.name, dtype="float32")
    g = 4

    def reward(prompts, completions, **_):
        return [float(task.verify(problems[p], c, True).correct)
                for p, c in zip(prompts, completions, strict=True)]  # fmt: skip

    args = trl.GRPOConfig(
        output_dir=str(work / "trl"), per_device_train_batch_size=2 * g, num_generations=g,
        max_completion_length=8, beta=0.0, bf16=device.cuda and shapes.precision == "bf16",
        fp16=False, max_steps=1, logging_steps=1, save_strategy="no", report_to="none",
        use_cpu=not device.cuda, disable_tqdm=True, seed=0,
    )  # fmt: skip
    trainer = trl.GRPOTrainer(
        model=model, reward_funcs=[reward], args=args, processing_class=tokenizer,
        train_dataset=Dataset.from_dict({"prompt": list(problems)}),
    )  # fmt: skip
    t0 = time.perf_counter()
    trainer.train()
    logged = [h for h in trainer.state.log_history if "loss" in h or "reward" in h]
    last = logged[-1] if logged else {}
    out = {"trl": trl.__version__, "seconds": round(time.perf_counter() - t0, 2),
           "global_step": trainer.state.global_step,
           "model_device": str(next(trainer.model.parameters()).device)}  # fmt: skip
    put(out, "loss", last.get("loss"), "not logged by this trl version")
    put(out, "reward", last.get("reward"), "not logged by this trl version")
    return out

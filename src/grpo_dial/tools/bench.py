"""`grpo-dial bench`: our GRPO step against TRL's GRPOTrainer step, and the pipeline's fast paths.

Step workloads (both sides get the same model weights, tokenizer, prompt pool and settings):
- fixed: a 2-layer, 128-wide Llama over a 32-symbol character tokenizer, 16 prompts x G = 8,
  6-token prompts (bos + 5 characters), exactly 24 new tokens (EOS suppressed: a forward hook
  on the output head sets the EOS logits to -1e4 on both sides, so no response finishes),
  temperature 1, beta 0, one AdamW step per batch (lr 1e-4, clip 1.0), fp32; reward 1 iff the
  response holds an odd number of digits (ParityTask: groups stay informative, so every row
  has a gradient on both sides).
- free: the embedded arithmetic task with free-length responses (at most 64 new tokens) from a
  warm-started policy (results/policy/base when present, else a 2 x 128 Llama warm-started here
  for `warm_start_steps`); most responses end well before the limit.
Ours is trainer._step without the probe and checkpoint: sample_batch (generate_groups + score),
advantage.advantages, policy_update, train_records.record_step. TRL's is one GRPOTrainer
optimizer step (from on_step_begin to on_step_end of a callback, which also runs our step, so
the two alternate in one process). Rewards on both sides come from the task's verifier; the
dial is TRL's default GRPO (scale_rewards='group': sample std, eps 1e-4; loss_type 'grpo').

Split: generation (generate_groups / GRPOTrainer._generate), scoring (score /
_calculate_rewards), training = the rest. Memory: the peak of tensor memory allocated during a
step above what was allocated at its start (torch.profiler memory events; on CUDA
max_memory_allocated), in separate untimed steps after the timed ones (the profiler slows them).

Pipeline checks: a 215,608-row pass-rate table through the difficulty analysis, `snakemake -n` on
every config, and whether building the DAG imports torch.
"""

from __future__ import annotations

import contextlib
import copy
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path

WORKLOADS = ("fixed", "free")
FIXED_ALPHABET = "0123456789+=;#chkabdefgijlmnopq"[:28]  # 28 characters + 4 specials = 32
EOS_SUPPRESSION = -1e4  # exp(-1e4 - max) == 0 in float32: EOS is never sampled
PASSRATE_ROWS = 215_608


@dataclass(frozen=True)
class StepSettings:
    """One step workload: batch shape, sampling and optimizer, identical for both sides."""

    workload: str = "fixed"
    prompts: int = 16
    group_size: int = 8
    max_new_tokens: int = 24
    temperature: float = 1.0
    lr: float = 1e-4
    grad_clip: float = 1.0
    n_layers: int = 2
    hidden_size: int = 128
    seed: int = 0
    policy: str | None = None  # free: a saved policy directory; None = results/policy/base or warm
    warm_start_steps: int = 300
    device: str = "cpu"

    def __post_init__(self) -> None:
        if self.workload not in WORKLOADS:
            raise ValueError(f"workload={self.workload!r} is not valid; choose one of {WORKLOADS}")
        for name in ("prompts", "group_size", "max_new_tokens", "n_layers", "hidden_size"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"{name} must be an integer >= 1, got {v!r}")
        if self.group_size < 2:
            raise ValueError(f"group_size must be >= 2 (TRL needs 2), got {self.group_size}")


@dataclass
class SideTimes:
    """Per timed step of one side: seconds in total and per phase, completion tokens."""

    total: list[float] = field(default_factory=list)
    generation: list[float] = field(default_factory=list)
    scoring: list[float] = field(default_factory=list)
    tokens: list[int] = field(default_factory=list)
    informative: list[float] = field(default_factory=list)  # rows with A != 0 (ours)
    peak_bytes: int | None = None

    def summary(self) -> dict[str, float]:
        """Median / min / max s/step, median phases, completion tokens/s, peak MiB."""
        med = statistics.median
        phases = zip(self.total, self.generation, self.scoring, strict=True)
        train = [t - g - s for t, g, s in phases]
        return {
            "steps": len(self.total),
            "s_per_step_median": med(self.total),
            "s_per_step_min": min(self.total),
            "s_per_step_max": max(self.total),
            "tokens_per_s": sum(self.tokens) / sum(self.total),
            "tokens_per_step": sum(self.tokens) / len(self.tokens),
            "generation_s": med(self.generation),
            "scoring_s": med(self.scoring),
            "training_s": med(train),
            "peak_mib": math.nan if self.peak_bytes is None else self.peak_bytes / 2**20,
            "informative_rows": statistics.mean(self.informative) if self.informative else None,
        }


# --------------------------------------------------------------------------- memory


class PeakMemory:
    """Peak tensor bytes allocated between start() and stop() above the level at start()."""

    def __init__(self, device: str) -> None:
        self.cuda = str(device).startswith("cuda")
        self.peak: int | None = None

    def start(self) -> None:
        import torch

        if self.cuda:
            torch.cuda.synchronize()
            self.base = torch.cuda.memory_allocated()
            torch.cuda.reset_peak_memory_stats()
        else:
            from torch.profiler import ProfilerActivity, profile

            self.prof = profile(activities=[ProfilerActivity.CPU], profile_memory=True)
            self.prof.start()

    def stop(self) -> int:
        import numpy as np
        import torch

        if self.cuda:
            torch.cuda.synchronize()
            self.peak = int(torch.cuda.max_memory_allocated() - self.base)
            return self.peak
        self.prof.stop()
        events = self.prof.profiler.kineto_results.events()
        mem = sorted(
            (e.start_ns(), e.nbytes())
            for e in events
            if e.name() == "[memory]" and e.device_type().name == "CPU"
        )
        cum = np.cumsum([b for _, b in mem]) if mem else np.zeros(1)
        self.peak = int(max(cum.max(), 0))
        return self.peak


# --------------------------------------------------------------------------- set-up


@dataclass
class Setup:
    """What both sides share: the model (one copy each), tokenizer, task and prompt pool."""

    model: object
    tokenizer: object
    task: object
    pool: list
    eos_ids: list[int]


def _fixed_pool(task, n: int, seed: int) -> list:
    """Arithmetic train problems whose prompt has exactly 5 characters (bos + 5 = 6 tokens)."""
    problems = task.problems("train", 900, seed)
    pool = [p for p in problems if len(p.prompt) == 5]
    if len(pool) < n:
        raise ValueError(f"only {len(pool)} five-character prompts for {n} needed")
    return pool[: max(n, 64)]


@dataclass(frozen=True)
class ParityTask:
    """The fixed workload's task: the arithmetic prompts, reward 1 iff the response holds an odd
    number of digits. A random response is right half the time and a policy cannot learn it in
    a few steps, so groups stay informative and every row keeps a gradient (the arithmetic
    verifier scores every unfinished response 0: all groups silent, nothing to learn)."""

    base: object

    def verify(self, problem, response: str, finished: bool):
        from grpo_dial.data.tasks.base import Verdict

        odd = sum(c.isdigit() for c in response) % 2 == 1
        return Verdict(correct=odd, truncated=not finished, answer=None)

    def length_split(self, problem, response: str):
        return None

    def __getattr__(self, name: str):
        return getattr(self.base, name)


def _suppress_eos(model, eos_ids: list[int]) -> None:
    """Forward hook on the output head: EOS logits -> -1e4 (never sampled, finite entropy)."""
    import torch

    idx = torch.tensor(eos_ids)

    def hook(_module, _inputs, logits):
        return logits.index_fill(-1, idx.to(logits.device), EOS_SUPPRESSION)

    model.get_output_embeddings().register_forward_hook(hook)


def build_setup(settings: StepSettings, progress: bool = False) -> Setup:
    """The workload's model, tokenizer, task and pool (see the module docstring)."""
    from grpo_dial.data.tasks.arithmetic import ArithmeticTask
    from grpo_dial.policy.model import (
        PolicySpec,
        build_char_tokenizer,
        build_tiny_llama,
        load_policy,
    )
    from grpo_dial.policy.rollout import _eos_ids

    task = ArithmeticTask()
    spec = PolicySpec(
        n_layers=settings.n_layers,
        hidden_size=settings.hidden_size,
        n_heads=4 if settings.hidden_size % 4 == 0 else 1,
        intermediate_size=3 * settings.hidden_size,
    )
    if settings.workload == "fixed":
        tokenizer = build_char_tokenizer(FIXED_ALPHABET)
        model = build_tiny_llama(spec, tokenizer, settings.seed)
        pool = _fixed_pool(ArithmeticTask(operands=2, digits=2), settings.prompts, settings.seed)
        task = ParityTask(task)
        eos = _eos_ids(model, tokenizer)
        _suppress_eos(model, eos)
    else:
        path = settings.policy
        if path is None and Path("results/policy/base/config.json").exists():
            path = "results/policy/base"
        if path is not None:
            model, tokenizer = load_policy(path, settings.device, "float32")
        else:
            from grpo_dial.policy.warm_start import WarmStartConfig, warm_start

            tokenizer = build_char_tokenizer(task.alphabet)
            model = build_tiny_llama(spec, tokenizer, settings.seed)
            cfg = WarmStartConfig(
                steps=settings.warm_start_steps,
                warmup_steps=min(50, settings.warm_start_steps // 4),
                progress=progress,
            )
            warm_start(task, model, tokenizer, cfg)
        pool = task.problems("train", 256, 0)
        eos = _eos_ids(model, tokenizer)
    model = model.to(settings.device).float().eval()
    return Setup(model, tokenizer, task, pool, eos)


# --------------------------------------------------------------------------- our step


def _timing(original: Callable, name: str, sink: Callable[[], dict[str, float]]) -> Callable:
    """original, adding each call's wall time to sink()[name]."""

    def wrapper(*args, **kwargs):
        t = time.perf_counter()
        try:
            return original(*args, **kwargs)
        finally:
            times = sink()
            times[name] = times.get(name, 0.0) + time.perf_counter() - t

    return wrapper


@contextlib.contextmanager
def _timed(module, name: str, sink: dict[str, float]) -> Iterator[None]:
    """Replace module.name by a wrapper adding its wall time to sink[name] (restored after)."""
    original = getattr(module, name)
    setattr(module, name, _timing(original, name, lambda: sink))
    try:
        yield
    finally:
        setattr(module, name, original)


def make_our_step(setup: Setup, settings: StepSettings) -> Callable[[], dict[str, float]]:
    """A closure running one step of our trainer (trainer._step without probe/checkpoint)."""
    from grpo_dial.core import advantage
    from grpo_dial.train import records as rec
    from grpo_dial.train import step as train_step
    from grpo_dial.train.config import TrainConfig

    config = TrainConfig(
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
    dial = advantage.dial_from_config({"preset": "grpo", "std_ddof": 1, "eps": 1e-4})
    model = setup.model
    optimizer = train_step.make_optimizer(model, config)
    rng, generator = train_step.sampling_rngs(config)
    ids = [p.prompt_id for p in setup.pool]
    bands, vocab = rec.band_map(ids, [p.difficulty for p in setup.pool], None)
    records = rec.new_records()
    step = [0]

    def run() -> dict[str, float]:
        sink: dict[str, float] = {}
        step[0] += 1
        t0 = time.perf_counter()
        with _timed(train_step, "generate_groups", sink), _timed(train_step, "score", sink):
            batch = train_step.sample_batch(
                model, setup.tokenizer, setup.task, setup.pool, dial, config, rng, generator
            )
        adv = advantage.advantages(batch.rewards, batch.group_ids, dial)  # (N,)
        train = batch.rollouts.select(batch.trained)
        result = train_step.policy_update(
            model, optimizer, train, adv[batch.trained], dial, config
        )
        rec.record_step(
            records, step[0], batch, adv, result, dial, bands, vocab, config.lr,
            time.perf_counter() - t0,
        )  # fmt: skip
        if len(records["responses"]) > 4:  # keep the bench's memory flat
            for table in records.values():
                table.clear()
        return {
            "total": time.perf_counter() - t0,
            "informative": float((adv != 0).float().mean()),
            "generation": sink.get("generate_groups", 0.0),
            "scoring": sink.get("score", 0.0),
            "tokens": int(batch.rollouts.response_mask.sum()),
        }

    return run


# --------------------------------------------------------------------------- TRL's step


def _trl_args(settings: StepSettings, out_dir: str, max_steps: int):
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
                    side = times["trl"]
                    side.total.append(elapsed)
                    side.generation.append(self.sink.get("_generate", 0.0))
                    side.scoring.append(self.sink.get("_calculate_rewards", 0.0))
                    side.tokens.append(sum(trl_tokens))
                    me = times["ours"]
                    me.total.append(mine["total"])
                    me.generation.append(mine["generation"])
                    me.scoring.append(mine["scoring"])
                    me.tokens.append(mine["tokens"])
                    me.informative.append(mine["informative"])
            bar.update(1)

    callback = Interleave()
    with tempfile.TemporaryDirectory() as out_dir, warnings.catch_warnings():
        # transformers renames gradient_checkpointing; TRL still sets it (to False here)
        warnings.filterwarnings("ignore", "`(is_)?gradient_checkpointing", FutureWarning)
        trainer = GRPOTrainer(
            model=trl_model,
            reward_funcs=reward,
            args=_trl_args(settings, out_dir, total),
            train_dataset=data,
            processing_class=setup.tokenizer,
            callbacks=[callback],
        )
        for name in ("_generate", "_calculate_rewards"):
            _wrap_method(trainer, name, lambda: callback.sink)
        trainer.remove_callback(PrinterCallback)  # it prints the final metrics to stdout
        trainer.train()
    bar.close()
    return {side: t.summary() for side, t in times.items()}


def _wrap_method(obj, name: str, sink: Callable[[], dict[str, float]]) -> None:
    setattr(obj, name, _timing(getattr(obj, name), name, sink))


# --------------------------------------------------------------------------- pipeline checks


def synthetic_passrate_table(rows: int = PASSRATE_ROWS, seed: int = 0):
    """A pass-rate table of `rows` prompts in the passrates schema (Big-Math-like Beta mixture)."""
    from grpo_dial.passrates.tables import synthetic_bigmath_like

    return synthetic_bigmath_like(n_prompts=rows, n=64, seed=seed)[0]


def time_difficulty(rows: int = PASSRATE_ROWS) -> dict[str, float]:
    """Seconds of the difficulty analysis (every output of stages.difficulty_analysis) on a
    `rows`-prompt table, with the default config's parameters."""
    from grpo_dial.passrates.tables import write_passrates
    from grpo_dial.stages.difficulty import difficulty_analysis

    table = synthetic_passrate_table(rows)
    params = {
        "group_sizes": [4, 8, 16, 32, 64],
        "fidelity": 0.9,
        "histogram_bins": 20,
        "allocation": {"per_prompt_budget": 8, "signal": "grpo", "g_min": 2, "g_max": 64},
    }
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "table.parquet"
        write_passrates(table, src)
        names = ("histogram", "mass_shares", "silent_fractions", "recommended_g",
                 "allocation", "allocation_bands", "summary")  # fmt: skip
        out = {n: str(Path(tmp) / f"{n}.{'parquet' if n == 'recommended_g' else 'csv'}")
               for n in names}  # fmt: skip
        t = time.perf_counter()
        difficulty_analysis({"table": str(src)}, out, params)
        seconds = time.perf_counter() - t
    return {"rows": len(table), "difficulty_analysis_s": seconds}


def time_dry_runs(configs: list[Path] | None = None) -> dict[str, float | str]:
    """Wall seconds of `snakemake -n` per config file (each other file as an overlay on
    config/config.yaml, as their headers say); a failing dry run gives its last error line."""
    configs = configs or sorted(Path("config").glob("*.yaml"))
    exe = Path(sys.executable).with_name("snakemake")
    result: dict[str, float | str] = {}
    for cfg in configs:
        files = [str(cfg)] if cfg.name == "config.yaml" else ["config/config.yaml", str(cfg)]
        cmd = [str(exe), "-n", "--quiet", "--configfile", *files]
        t = time.perf_counter()
        done = subprocess.run(cmd, capture_output=True, text=True)
        result[cfg.name] = time.perf_counter() - t
        if done.returncode != 0:
            text = (done.stderr + done.stdout).splitlines()
            lines = [x for x in text if "error" in x.lower()] or ["failed"]
            result[cfg.name] = f"failed: {lines[-1].strip()}"
    return result


def torch_at_dag_build() -> bool:
    """True when parsing the workflow (snakemake -n on the default config) imports torch."""
    exe = Path(sys.executable).with_name("snakemake")
    env = dict(os.environ, PYTHONPROFILEIMPORTTIME="1")
    done = subprocess.run(
        [str(exe), "-n", "--quiet"], capture_output=True, text=True, env=env
    )
    lines = [x for x in done.stderr.splitlines() if x.startswith("import time:")]
    if not lines:
        raise ValueError("snakemake -n printed no import times: cannot tell")
    return any(line.rstrip().endswith("| torch") for line in lines)


# --------------------------------------------------------------------------- output


COLUMNS = (
    ("s_per_step_median", "s/step med", "{:.3f}"),
    ("s_per_step_min", "min", "{:.3f}"),
    ("s_per_step_max", "max", "{:.3f}"),
    ("tokens_per_s", "tok/s", "{:.0f}"),
    ("generation_s", "gen s", "{:.3f}"),
    ("scoring_s", "score s", "{:.3f}"),
    ("training_s", "train s", "{:.3f}"),
    ("peak_mib", "peak MiB", "{:.1f}"),
)


def format_table(results: dict[str, dict[str, dict[str, float]]]) -> str:
    """Markdown table: one row per (workload, side) and the speed-up of ours (TRL / ours)."""
    head = ["workload", "side", *[c[1] for c in COLUMNS]]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for workload, sides in results.items():
        for side in ("trl", "ours"):
            if side not in sides:
                continue
            cells = [fmt.format(sides[side][key]) for key, _, fmt in COLUMNS]
            lines.append(f"| {workload} | {side} | " + " | ".join(cells) + " |")
        if "trl" in sides and "ours" in sides:
            ratio = sides["trl"]["s_per_step_median"] / sides["ours"]["s_per_step_median"]
            mem = sides["trl"]["peak_mib"] / sides["ours"]["peak_mib"]
            lines.append(
                f"| {workload} | speed-up | {ratio:.2f}x | | | | | | | "
                f"{mem:.2f}x less |"
            )
    return "\n".join(lines)


@dataclass(frozen=True)
class BenchOptions:
    workloads: tuple[str, ...] = WORKLOADS
    steps: int = 20
    warmup: int = 3
    threads: int | None = None
    pipeline: bool = False
    settings: dict = field(default_factory=dict)  # StepSettings overrides (tests: tiny sizes)


def run_bench(options: BenchOptions, progress: bool = True) -> dict:
    """Every requested workload (and the pipeline checks): a JSON-ready dict."""
    import torch

    if options.threads is not None:
        if options.threads < 1:
            raise ValueError(f"--threads must be >= 1, got {options.threads}")
        torch.set_num_threads(options.threads)
    if options.steps < 1 or options.warmup < 0:
        raise ValueError("--steps must be >= 1 and --warmup >= 0")
    out: dict = {"threads": torch.get_num_threads(), "steps": {}}
    for workload in options.workloads:
        overrides = dict(options.settings)
        if workload == "free":
            overrides.setdefault("max_new_tokens", 64)
        settings = StepSettings(workload=workload, **overrides)
        out["steps"][workload] = run_step_bench(settings, options.steps, options.warmup, progress)
        out.setdefault("settings", {})[workload] = asdict(settings)
    if options.pipeline:
        out["pipeline"] = {
            **time_difficulty(),
            "dry_run_s": time_dry_runs(),
            "torch_imported_at_dag_build": torch_at_dag_build(),
        }
    return out


def format_report(result: dict) -> str:
    text = [f"threads: {result['threads']}", format_table(result["steps"])]
    pipe = result.get("pipeline")
    if pipe:
        seconds = pipe["difficulty_analysis_s"]
        text.append(f"difficulty analysis on {pipe['rows']:,} prompts: {seconds:.2f} s")
        for name, s in pipe["dry_run_s"].items():
            text.append(f"snakemake -n {name}: " + (s if isinstance(s, str) else f"{s:.2f} s"))
        text.append(f"torch imported at DAG build: {pipe['torch_imported_at_dag_build']}")
    return "\n".join(text)


def to_json(result: dict) -> str:
    return json.dumps(result, indent=2, default=float)

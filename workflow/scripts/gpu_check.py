"""GPU check: does config/gpu.yaml run here, how fast, in how much memory?

On a machine with a CUDA GPU, by default in about 1-3 minutes (predicted; not yet timed on a GPU):
1. the throughput at the config's full batch shape: one batch of prompts_per_step x G responses of
   up to max_new_tokens generated (bf16 autocast as configured), then one policy update on it
   (each twice: the first run warms up); tokens/s of each, peak GPU memory allocated and reserved
   (torch.cuda.max_memory_allocated / max_memory_reserved) next to policy.memory's prediction;
   running out of memory stops it with one line naming the setting to lower;
2. with --chain also the chain: snakemake on the config shrunk by REDUCED (conversion, pass rates
   on 32 prompts, every dial for 2 steps of 16 prompts x G with 128 new tokens, the analyses), one
   GPU job at a time, into <out>/chain (several more minutes).
It prints both and writes <out>/gpu_check.json.

    python workflow/scripts/gpu_check.py                      # config/gpu.yaml, results/gpu_check
    python workflow/scripts/gpu_check.py --chain              # and the reduced chain
    python workflow/scripts/gpu_check.py --dry-run            # print the plan, run nothing
    python workflow/scripts/gpu_check.py --config my.yaml --model /path/to/hf_model

Without a CUDA GPU it stops with one line (exit status 2); --dry-run works anywhere.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import json
import subprocess
import sys
import time
from collections.abc import Mapping
from dataclasses import fields
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "src"))  # the repository's own package, installed or not

# The chain at a reduced size: every rule of config/gpu.yaml runs, each for seconds (the full
# batch shape is timed separately by `measure`).
REDUCED: dict = {
    "pass_rates": {"pool": 32, "samples": 4, "max_new_tokens": 128},
    "train": {
        "seeds": [0],
        "steps": 2,
        "prompts_per_step": 16,
        "max_new_tokens": 128,
        "heldout_prompts": 16,
        "eval_samples": 0,
        "eval_every": 2,
        "checkpoint_every": 2,
        "identity_every": 2,
        "identity_groups": 1,
    },
    "passrate_tables": {"synthetic": {"n_prompts": 2000}},
    "theory": {"identity": {"n_groups": 2000}},
    "simulate": {"tables": ["synthetic"], "n_prompts": 300, "steps": 20},
    "dapo_consistency": {"n_boot": 20},
    "decompose": {"n_boot": 20},
    "real_lengths": {"n_boot": 20},
}


def merge(base: Mapping, overlay: Mapping) -> dict:
    """Deep merge as Snakemake merges --configfile overlays: nested mappings key by key."""
    out = copy.deepcopy(dict(base))
    for key, value in overlay.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def load_config(path: Path) -> dict:
    """config/config.yaml with `path` over it (what `snakemake --configfile path` sees)."""
    config = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    if path.resolve() != (REPO / "config" / "config.yaml").resolve():
        if not path.is_file():
            raise ValueError(f"config file not found: {path}")
        config = merge(config, yaml.safe_load(path.read_text()) or {})
    return config


def reduced_overlay(results_dir: Path, steps: int) -> dict:
    """REDUCED with the run's results folder and step count."""
    overlay = merge(REDUCED, {"train": {"steps": steps}})
    overlay["results_dir"] = str(results_dir)
    return overlay


def chain_command(config: Path, overlay: Path, cores: int) -> list[str]:
    return [
        sys.executable,
        "-m",
        "snakemake",
        "--snakefile",
        str(REPO / "Snakefile"),
        "--directory",
        str(REPO),
        "--configfile",
        str(config),
        str(overlay),
        "--cores",
        str(cores),
        "--resources",
        "gpu=1",
    ]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--config", type=Path, default=REPO / "config" / "gpu.yaml")
    parser.add_argument("--out", type=Path, default=REPO / "results" / "gpu_check")
    parser.add_argument("--model", help="policy path or hub id (default: the config's base)")
    parser.add_argument("--steps", type=int, default=2, help="training steps per dial in the chain")
    parser.add_argument("--cores", type=int, default=4, help="CPU cores for the chain")
    parser.add_argument("--chain", action="store_true", help="also run the reduced chain")
    parser.add_argument("--skip-chain", action="store_true", help="throughput only (the default)")
    parser.add_argument("--dry-run", action="store_true", help="print the plan, run nothing")
    parser.add_argument("--device", default="cuda", help=argparse.SUPPRESS)  # tests: cpu
    args = parser.parse_args(argv)
    if args.steps < 1 or args.cores < 1:
        parser.error("--steps and --cores must be >= 1")
    return args


def require_cuda() -> str:
    """The GPU's name; a ValueError when torch sees no CUDA GPU."""
    import torch

    if not torch.cuda.is_available():
        raise ValueError(
            "gpu_check needs a CUDA GPU and torch sees none "
            f"(torch {torch.__version__}, CUDA build {torch.version.cuda}); "
            "run it on a GPU machine, or --dry-run to see the plan"
        )
    return torch.cuda.get_device_name(0)


def base_model(config: Mapping, out: Path, model: str | None) -> str:
    """The policy to measure: --model, the chain's converted SmolLM2, or the config's base."""
    if model:
        return model
    base = config["model"]["base"]
    if base == "smollm2":
        from grpo_dial.policy.convert import SMOLLM_NAME, convert_smollm

        path = out / "chain" / "models" / SMOLLM_NAME
        if not (path / "config.json").exists():
            convert_smollm(path)
        return str(path)
    if base == "tiny":
        raise ValueError("model.base tiny has no model to measure before warm start; use --model")
    return base


@contextlib.contextmanager
def out_of_memory(what: str, setting: str, value):
    """A CUDA out-of-memory error in the block as one ValueError line naming the setting."""
    import torch

    try:
        yield
    except torch.OutOfMemoryError:
        raise ValueError(
            f"out of GPU memory while {what} at train.{setting}={value}; lower train.{setting} "
            "(grpo-dial memory --configfile ... predicts the peak)"
        ) from None


def predicted(config: Mapping) -> dict:
    """policy.memory's predicted peaks in GiB (None where the model's shape is unknown)."""
    from grpo_dial.policy import memory

    try:
        plan = memory.plan_config(config)
    except ValueError:
        return {}
    return {name: round(part["peak"] / memory.GIB, 2) for name, part in plan.items()}


def measure(model_dir: str, config: Mapping, device: str) -> dict:
    """Generation and update throughput at the config's batch shape, and peak GPU memory.

    Tokens: generated response tokens for generation; prompt + response tokens through the
    training forward and backward for the update. Each is timed on its second run (the first
    warms kernels and allocators up). Memory is None off CUDA."""
    import torch

    from grpo_dial.core.advantage import advantages
    from grpo_dial.core.dial import dial_from_config
    from grpo_dial.data.public import with_public_paths
    from grpo_dial.data.tasks import get_task
    from grpo_dial.policy.model import autocast, load_policy
    from grpo_dial.policy.rollout import generate_groups
    from grpo_dial.train.config import TrainConfig
    from grpo_dial.train.step import make_optimizer, policy_update, score

    # the train keys that are TrainConfig fields; train.allocation is an arm's defaults (uniform)
    names = {f.name for f in fields(TrainConfig)} - {"allocation"}
    train = {k: v for k, v in config["train"].items() if k in names}
    cfg = TrainConfig(
        **train,
        device=device,
        attn_implementation=config["model"].get("attn_implementation", "sdpa"),
        progress=False,
    )
    cuda = device.startswith("cuda")
    spec = with_public_paths(config["task"], config, REPO)  # public: <name> -> its file
    task = get_task(spec["name"], **spec.get("options", {}))
    problems = task.problems("train", cfg.prompts_per_step, 0)
    model, tokenizer = load_policy(
        model_dir,
        device=device,
        dtype="float32",
        attn_implementation=cfg.attn_implementation,
        gradient_checkpointing=cfg.gradient_checkpointing,
    )
    optimizer = make_optimizer(model, cfg)
    dial = dial_from_config({"preset": "grpo"})
    generator = torch.Generator(device=device).manual_seed(0)

    def sync() -> None:
        if cuda:
            torch.cuda.synchronize()

    out: dict = {"device": device, "precision": cfg.precision, "model": model_dir}
    out["parameters_m"] = sum(p.numel() for p in model.parameters()) / 1e6
    out["responses"] = len(problems) * cfg.group_size
    for rep in range(2):
        if cuda:
            torch.cuda.reset_peak_memory_stats()
        sync()
        t0 = time.perf_counter()
        with out_of_memory("sampling", "generation_batch", cfg.generation_batch), autocast(
            cfg.precision, device
        ):
            rollouts = generate_groups(
                model,
                tokenizer,
                problems,
                cfg.group_size,
                cfg.max_new_tokens,
                cfg.temperature,
                generator,
                generation_batch=cfg.generation_batch,
            )
        sync()
        gen_s = time.perf_counter() - t0
        gen_mem = _peaks(cuda)
        rewards = score(task, rollouts)[0]
        adv = advantages(rewards, rollouts.group_ids.cpu(), dial)
        if cuda:
            torch.cuda.reset_peak_memory_stats()
        t0 = time.perf_counter()
        with out_of_memory("updating", "micro_batch", cfg.micro_batch):
            result = policy_update(model, optimizer, rollouts, adv, dial, cfg)
        sync()
        train_s = time.perf_counter() - t0
        train_mem = _peaks(cuda)
        if rep == 0:
            continue
        gen_tokens = int(rollouts.response_mask.sum())
        train_tokens = gen_tokens + int(rollouts.prompt_mask.sum())
        out.update(
            generated_tokens=gen_tokens,
            generation_seconds=round(gen_s, 3),
            generation_tokens_per_s=round(gen_tokens / gen_s, 1),
            update_tokens=train_tokens,
            update_seconds=round(train_s, 3),
            update_tokens_per_s=round(train_tokens / train_s, 1),
            peak_memory_generation_gib=gen_mem[0],
            peak_reserved_generation_gib=gen_mem[1],
            peak_memory_update_gib=train_mem[0],
            peak_reserved_update_gib=train_mem[1],
            predicted_peak_gib=predicted(config),
            accuracy=float(rewards.mean()),
            update_finite=bool(result.finite),
        )
    return out


def _peaks(cuda: bool) -> tuple[float | None, float | None]:
    """(peak allocated, peak reserved) GiB since the last reset; None off CUDA."""
    import torch

    if not cuda:
        return None, None
    gib = 2**30
    return (
        round(torch.cuda.max_memory_allocated() / gib, 2),
        round(torch.cuda.max_memory_reserved() / gib, 2),
    )


def run_chain(args: argparse.Namespace) -> dict:
    """snakemake on the reduced config; wall seconds and each job's benchmark seconds."""
    args.out.mkdir(parents=True, exist_ok=True)
    overlay = args.out / "reduced.yaml"
    results = args.out / "chain"
    overlay.write_text(yaml.safe_dump(reduced_overlay(results, args.steps), sort_keys=False))
    t0 = time.perf_counter()
    done = subprocess.run(chain_command(args.config, overlay, args.cores), cwd=REPO)
    wall = time.perf_counter() - t0
    if done.returncode != 0:
        raise ValueError(f"the reduced chain failed (exit {done.returncode}); see its log above")
    jobs = {}
    for tsv in sorted((results / "benchmarks").rglob("*.tsv")):
        seconds = float(tsv.read_text().splitlines()[1].split("\t")[0])
        jobs[str(tsv.relative_to(results / "benchmarks").with_suffix(""))] = round(seconds, 1)
    return {"wall_seconds": round(wall, 1), "job_seconds": jobs}


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        config = load_config(args.config)
        if args.dry_run:
            overlay = reduced_overlay(args.out / "chain", args.steps)
            print("reduced overlay:\n" + yaml.safe_dump(overlay, sort_keys=False))
            command = chain_command(args.config, args.out / "reduced.yaml", args.cores)
            print("chain:", " ".join(command))
            train = config["train"]
            print(
                f"throughput: {train['prompts_per_step']} prompts x G={train['group_size']}, "
                f"max_new_tokens={train['max_new_tokens']}, precision={train['precision']}; "
                f"predicted peaks {predicted(config)} GiB"
            )
            return 0
        if args.device.startswith("cuda"):
            print(f"GPU: {require_cuda()}")
        report: dict = {}
        if args.chain and not args.skip_chain:
            report["chain"] = run_chain(args)
            chain = report["chain"]
            print(f"chain: {chain['wall_seconds']} s; seconds per job: {chain['job_seconds']}")
        model = base_model(config, args.out, args.model)
        report["throughput"] = measure(model, config, args.device)
    except ValueError as error:
        print(f"gpu_check: {error}", file=sys.stderr)
        return 2
    t = report["throughput"]
    print(
        f"generation: {t['generation_tokens_per_s']} tokens/s ({t['generated_tokens']} tokens, "
        f"{t['responses']} responses, {t['generation_seconds']} s), "
        f"peak memory {t['peak_memory_generation_gib']} GiB allocated, "
        f"{t['peak_reserved_generation_gib']} GiB reserved"
    )
    print(
        f"training: {t['update_tokens_per_s']} tokens/s ({t['update_tokens']} tokens, "
        f"{t['update_seconds']} s), peak memory {t['peak_memory_update_gib']} GiB allocated, "
        f"{t['peak_reserved_update_gib']} GiB reserved"
    )
    print(f"predicted peaks (policy.memory): {t['predicted_peak_gib']} GiB")
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "gpu_check.json").write_text(json.dumps(report, indent=2))
    print(f"wrote {args.out / 'gpu_check.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

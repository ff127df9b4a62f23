"""`grpo-dial memory`: the predicted peak memory of a config's GPU jobs (grpo_dial.policy.memory),
after the checks the DAG build runs on the config's files and values (grpo_dial.dag.plan)."""

from __future__ import annotations

import argparse
from pathlib import Path


def _merged_config(paths: list[str]) -> dict:
    """config/config.yaml (the embedded default, when present here) with each file layered over
    it in turn, as Snakemake's --configfile does (grpo_dial.dag.config_files)."""
    from grpo_dial.dag.config_files import layered_config

    default = Path("config/config.yaml")
    return layered_config(([default] if default.exists() else []) + [Path(p) for p in paths])


def repo() -> Path:
    """The repository whose workflow schema checks a config: the working directory when it
    holds one (as snakemake's), else the checkout this package is installed from."""
    from grpo_dial.dag.plan import SCHEMA

    here = Path.cwd()
    return here if (here / SCHEMA).is_file() else Path(__file__).resolve().parents[3]


def memory(args: argparse.Namespace) -> None:
    """Print the predicted peak memory of a config's update and samplers (policy.memory), after
    the checks the DAG build runs on a config's files and values (grpo_dial.dag.plan)."""
    from grpo_dial.dag.plan import check_config
    from grpo_dial.policy.memory import GIB, plan_config

    config = _merged_config(args.configfile)
    default = Path("config/config.yaml")
    files = ([default] if default.exists() else []) + list(args.configfile)
    check_config(config, files, repo())
    parts = plan_config(config, args.prompt_len)
    print(f"model {config['model']['base']}, prompts up to {args.prompt_len} tokens "
          "(predictions; the model's error is stated in docs/performance.md)")  # fmt: skip
    for name, part in parts.items():
        detail = ", ".join(f"{k} {v / GIB:.2f}" for k, v in part.items() if k != "peak")
        fits = " ".join(f"{c} GB: {'fits' if part['peak'] <= c * 1e9 else 'NO'}" for c in (24, 80))
        print(f"{name:<17} peak {part['peak'] / GIB:6.2f} GiB ({detail} GiB)  {fits}")

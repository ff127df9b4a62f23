"""The pipeline's fast paths, timed: the difficulty analysis on a Big-Math-sized pass-rate table
(215,608 prompts), `snakemake -n` on every config, and whether building the DAG imports torch
(read off PYTHONPROFILEIMPORTTIME of the dry run)."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PASSRATE_ROWS = 215_608


def synthetic_passrate_table(rows: int = PASSRATE_ROWS, seed: int = 0):
    """A pass-rate table of `rows` prompts in the passrates schema (Big-Math-like Beta mixture)."""
    from grpo_dial.passrates.synthetic import synthetic_bigmath_like

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
    done = subprocess.run([str(exe), "-n", "--quiet"], capture_output=True, text=True, env=env)
    lines = [x for x in done.stderr.splitlines() if x.startswith("import time:")]
    if not lines:
        raise ValueError("snakemake -n printed no import times: cannot tell")
    return any(line.rstrip().endswith("| torch") for line in lines)

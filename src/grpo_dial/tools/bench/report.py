"""The bench's result as a Markdown table (one row per workload and side, then TRL / ours for
time and peak memory) with the pipeline checks below it, or as JSON."""

from __future__ import annotations

import json

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
            lines.append(f"| {workload} | speed-up | {ratio:.2f}x | | | | | | | {mem:.2f}x less |")
    return "\n".join(lines)


def format_report(result: dict) -> str:
    """run_bench's result as text: threads, the step table, then the pipeline checks if run."""
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

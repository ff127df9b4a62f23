"""The bench's table: both sides, TRL / ours for time and memory; the report and its JSON."""

from __future__ import annotations

import json
import math

from grpo_dial.tools.bench import report


def _side(s: float, peak: float) -> dict[str, float]:
    return {
        "steps": 3,
        "s_per_step_median": s,
        "s_per_step_min": s * 0.9,
        "s_per_step_max": s * 1.2,
        "tokens_per_s": 3072 / s,
        "tokens_per_step": 3072.0,
        "generation_s": s / 3,
        "scoring_s": 0.001,
        "training_s": s / 2,
        "peak_mib": peak,
    }


def test_table_has_both_sides_and_the_ratio() -> None:
    table = report.format_table({"fixed": {"trl": _side(0.3, 60.0), "ours": _side(0.1, 20.0)}})
    lines = table.splitlines()
    assert lines[0].startswith("| workload | side | s/step med | min | max | tok/s")
    assert len(lines) == 5 and all(line.count("|") == 11 for line in lines)
    assert lines[2].startswith("| fixed | trl | 0.300 | 0.270 | 0.360 | 10240 | 0.100 |")
    assert lines[3].startswith("| fixed | ours | 0.100 | 0.090 | 0.120 | 30720 |")
    assert "| fixed | speed-up | 3.00x |" in lines[4] and "3.00x less" in lines[4]
    one_side = report.format_table({"free": {"ours": _side(0.2, math.nan)}})
    assert "speed-up" not in one_side and "| nan |" in one_side


def test_report_lists_the_pipeline_checks_and_json_round_trips() -> None:
    result = {
        "threads": 2,
        "steps": {"fixed": {"trl": _side(0.4, 50.0), "ours": _side(0.2, 10.0)}},
        "pipeline": {
            "rows": 215_608,
            "difficulty_analysis_s": 1.234,
            "dry_run_s": {"config.yaml": 2.5, "gpu.yaml": "failed: MissingInputException"},
            "torch_imported_at_dag_build": False,
        },
    }
    lines = report.format_report(result).splitlines()
    assert lines[0] == "threads: 2"
    assert "| fixed | speed-up | 2.00x |" in lines[5] and "5.00x less" in lines[5]
    assert lines[6:] == [
        "difficulty analysis on 215,608 prompts: 1.23 s",
        "snakemake -n config.yaml: 2.50 s",
        "snakemake -n gpu.yaml: failed: MissingInputException",
        "torch imported at DAG build: False",
    ]
    assert json.loads(report.to_json(result)) == result

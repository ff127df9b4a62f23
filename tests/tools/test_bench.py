"""`grpo-dial bench`: the table, the CLI's errors, and one tiny interleaved step against TRL."""

from __future__ import annotations

import json
import math

import pytest

from grpo_dial.tools import bench, cli


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
    table = bench.format_table({"fixed": {"trl": _side(0.3, 60.0), "ours": _side(0.1, 20.0)}})
    lines = table.splitlines()
    assert lines[0].startswith("| workload | side | s/step med | min | max | tok/s")
    assert len(lines) == 5 and all(line.count("|") == 11 for line in lines)
    assert lines[2].startswith("| fixed | trl | 0.300 | 0.270 | 0.360 | 10240 | 0.100 |")
    assert lines[3].startswith("| fixed | ours | 0.100 | 0.090 | 0.120 | 30720 |")
    assert "| fixed | speed-up | 3.00x |" in lines[4] and "3.00x less" in lines[4]
    one_side = bench.format_table({"free": {"ours": _side(0.2, math.nan)}})
    assert "speed-up" not in one_side and "| nan |" in one_side


def test_summary_of_timed_steps() -> None:
    t = bench.SideTimes(
        total=[1.0, 3.0, 2.0], generation=[0.5, 1.0, 0.5], scoring=[0.1] * 3, tokens=[10, 20, 30]
    )
    s = t.summary()
    assert s["s_per_step_median"] == 2.0 and s["s_per_step_min"] == 1.0
    assert s["tokens_per_s"] == pytest.approx(60 / 6.0)
    assert s["training_s"] == pytest.approx(1.4)  # median of 0.4, 1.9, 1.4
    assert math.isnan(s["peak_mib"])


def test_bad_options_are_one_line_errors(capsys) -> None:
    assert cli.main(["bench", "--workload", "fixed", "--threads", "0"]) == 2
    assert "--threads must be >= 1" in capsys.readouterr().err
    with pytest.raises(ValueError, match="workload"):
        bench.StepSettings(workload="long")
    with pytest.raises(ValueError, match="group_size"):
        bench.StepSettings(group_size=1)


def test_one_tiny_step_each_side() -> None:
    pytest.importorskip("trl")
    tiny = {"n_layers": 1, "hidden_size": 16, "prompts": 2, "group_size": 2, "max_new_tokens": 4}
    options = bench.BenchOptions(workloads=("fixed",), steps=1, warmup=0, settings=tiny)
    result = bench.run_bench(options, progress=False)
    sides = result["steps"]["fixed"]
    for side in ("ours", "trl"):
        s = sides[side]
        assert s["steps"] == 1
        assert s["tokens_per_step"] == 2 * 2 * 4  # EOS suppressed: every response is full length
        assert s["s_per_step_median"] > 0 and s["generation_s"] > 0
        assert s["peak_mib"] > 0
    text = bench.format_report(result)
    assert "| fixed | speed-up |" in text
    assert json.loads(bench.to_json(result))["steps"]["fixed"]["ours"]["steps"] == 1

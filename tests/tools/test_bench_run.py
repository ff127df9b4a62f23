"""`grpo-dial bench`'s run: options checked up front (one-line CLI errors), each workload with
its settings, free-length responses at most 64 new tokens unless set (the step bench stubbed)."""

from __future__ import annotations

import pytest
import torch

from grpo_dial.tools import cli
from grpo_dial.tools.bench import BenchOptions, run, run_bench


def test_bad_options_are_one_line_errors(capsys) -> None:
    assert cli.main(["bench", "--workload", "fixed", "--threads", "0"]) == 2
    assert "--threads must be >= 1" in capsys.readouterr().err
    with pytest.raises(ValueError, match="--steps must be >= 1"):
        run_bench(BenchOptions(steps=0), progress=False)
    with pytest.raises(ValueError, match="--warmup >= 0"):
        run_bench(BenchOptions(warmup=-1), progress=False)


def test_each_workload_runs_with_its_settings(monkeypatch) -> None:
    seen = []

    def step_bench(settings, steps, warmup, progress):
        seen.append((settings, steps, warmup, progress))
        return {"ours": {"steps": steps}}

    monkeypatch.setattr(run, "run_step_bench", step_bench)
    threads = torch.get_num_threads()
    options = BenchOptions(steps=2, warmup=1, threads=threads, settings={"prompts": 3})
    out = run_bench(options, progress=False)
    assert out["threads"] == threads and "pipeline" not in out
    assert [s.workload for s, *_ in seen] == ["fixed", "free"]
    assert [s.max_new_tokens for s, *_ in seen] == [24, 64]
    assert all(s.prompts == 3 and tuple(rest) == (2, 1, False) for s, *rest in seen)
    assert out["steps"] == {"fixed": {"ours": {"steps": 2}}, "free": {"ours": {"steps": 2}}}
    assert out["settings"]["free"]["max_new_tokens"] == 64
    seen.clear()
    run_bench(BenchOptions(workloads=("free",), settings={"max_new_tokens": 8}), progress=False)
    assert seen[0][0].max_new_tokens == 8

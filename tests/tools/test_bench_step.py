"""Our step against TRL's GRPOTrainer: the matching GRPOConfig, and one tiny interleaved step
of each side through the whole bench."""

from __future__ import annotations

import json

import pytest

from grpo_dial.tools import bench
from grpo_dial.tools.bench.step import trl_args
from grpo_dial.tools.bench.workload import StepSettings


@pytest.mark.filterwarnings("ignore:`gradient_checkpointing:FutureWarning")  # TRL still sets it
def test_trl_config_matches_our_step(tmp_path) -> None:
    pytest.importorskip("trl")
    settings = StepSettings(prompts=3, group_size=4, max_new_tokens=7, lr=3e-4, grad_clip=0.5)
    args = trl_args(settings, str(tmp_path), max_steps=5)
    assert args.per_device_train_batch_size == 12 and args.num_generations == 4
    assert args.max_completion_length == 7 and args.max_steps == 5
    assert args.beta == 0.0 and args.loss_type == "grpo" and args.num_iterations == 1
    assert args.learning_rate == 3e-4 and args.max_grad_norm == 0.5 and args.weight_decay == 0
    assert args.top_k == 0 and args.top_p == 1.0 and args.temperature == 1.0


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

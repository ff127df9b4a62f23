"""The aware sweep's predicted job seconds (analysis/aware/cost.py) by hand."""

from __future__ import annotations

import pytest

from grpo_dial.analysis.aware.cost import aware_job_seconds
from grpo_dial.analysis.aware.probe import probe_passes
from grpo_dial.policy.step_time import Device

N = 134_515_008  # SmolLM2-135M's parameters, the tied head included


def test_the_probe_keeps_what_fits_in_two_gib():
    assert probe_passes(1, N) == 1 and probe_passes(2, N) == 2  # 2 x 8 N bytes = 2.0044 GiB
    assert probe_passes(200, 2**20) == 1 and probe_passes(257, 2**20) == 2  # 256 x 8 MiB = 2 GiB
    assert probe_passes(3, 10, keep_bytes=240) == 1 and probe_passes(3, 10, keep_bytes=239) == 2


def test_every_job_by_hand():
    config = {
        "model": {"base": "smollm2"},
        "train": {"prompts_per_step": 2, "group_size": 4, "seeds": [0, 1, 2], "steps": 5},
        "warm_start": {"steps": 7, "batch_size": 3},
        "channel": {"prompts": 2, "samples": 3},
        "aware_sweep": {"optimizers": ["adamw"], "levels": ["a0", "a80"], "kernel_rows": 10,
                        "probe_batches": 4},
    }  # fmt: skip
    device = Device("round", flops=1e10, call_s=0.5)
    t = aware_job_seconds(config, ["grpo", "dr_grpo", "nostd"], device, prompt=30,
                          mean_response=10, longest=6).set_index("job")  # fmt: skip
    per = lambda flop: flop * N / 1e10  # noqa: E731  seconds of `flop` FLOPs per parameter
    step = per(8 * (2 * 30 + 8 * 10)) + 6 * 0.5  # 2 prompts once + 8 rows x 10 tokens; 6 calls
    sample = per(2 * (8 * 30 + 24 * 10)) + 3.0  # 2 prompts x 4 rounds drawn, 3 samples each
    kernel = per(2 * 10 * 40 * 6)  # 10 of the 24 rows, whole sequences, once per mode
    assert t.loc["warm_start", "seconds"] == pytest.approx(per(6 * 7 * 3 * 40), rel=1e-12)
    assert t.loc["aware_base", "seconds"] == pytest.approx(sample + per(2 * 24 * 40) + kernel,
                                                           rel=1e-12)  # fmt: skip
    # 4 float64 gradients of N weights (4.3 GB) exceed the probe's 2 GiB: two passes
    assert t.loc["aware_probe", "steps"] == 2 * 3 * 4 * 2
    assert t.loc["aware_probe", "seconds"] == pytest.approx(sample + kernel + 48 * step, rel=1e-12)
    assert t["jobs"].tolist() == [1, 1, 1, 1 * 2 * 3, 1]  # one optimizer x 2 levels x 3 arms
    assert t["steps"].tolist() == [7, 0, 48, 3 * 5, 3 * 5]
    assert t.loc["aware_sweep_cell", "seconds"] == pytest.approx(6 * 15 * step, rel=1e-12)
    assert t.loc["aware_frozen_cell", "seconds"] == pytest.approx(15 * step, rel=1e-12)

"""The channel rules' entry points end to end: sample a tiny untrained policy of the tail task,
gather two dials' synthetic run tables against the prediction, draw both figures."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from grpo_dial import figures
from grpo_dial.core.arm_names import display_names
from grpo_dial.core.dial import read_arm
from grpo_dial.data.tasks import get_task
from grpo_dial.policy.model import PolicySpec, build_char_tokenizer, build_tiny_llama, save_policy
from grpo_dial.stages import channel
from grpo_dial.tables import read_table, write_table

TASK = {"name": "arithmetic", "options": {"operands": 2, "digits": 1, "tail_checks": 2}}
SETTINGS = {"prompts": 3, "samples": 4, "temperature": 1.0, "seed": 0, "reference": "grpo"}


def _params(**extra) -> dict:
    return {"task": TASK, "channel": SETTINGS, "device": "cpu", "pool": 8, "pool_seed": 0,
            "max_new_tokens": 12, "threads": 1, **extra}  # fmt: skip


def _responses(seed: int, lift: float) -> pd.DataFrame:
    """Steps x groups of 8; wrong tails grow by `lift` chars per step, correct ones do not."""
    rng = np.random.default_rng(seed)
    rows = []
    for step in range(10):
        for g in range(4):
            for i in range(8):
                wrong = i % 2 == 0
                tail = rng.integers(0, 20) + (lift * step if wrong else 0.0)
                rows.append((step, g, f"p{g}", "o2d1", 1 - int(wrong), 0, 10.0, tail))
    cols = ["step", "group", "prompt_id", "difficulty", "reward", "resample_round", "work"]
    df = pd.DataFrame(rows, columns=[*cols, "redundant"])
    return df.assign(length=df["work"] + df["redundant"])


def test_samples_then_summary_then_figures(tmp_path: Path, monkeypatch) -> None:
    task = get_task(TASK["name"], **TASK["options"])
    tok = build_char_tokenizer(task.alphabet)
    save_policy(build_tiny_llama(PolicySpec(n_layers=1, hidden_size=16, n_heads=2,
                                            intermediate_size=32), tok, seed=0), tok,
                tmp_path / "base")  # fmt: skip
    base = tmp_path / "channel/base/samples.parquet"
    channel.channel_samples({"model": str(tmp_path / "base")}, {"samples": str(base)}, _params())
    rows = read_table(base)
    assert len(rows) == 3 * 4 and rows["group"].tolist() == np.repeat(range(3), 4).tolist()

    from grpo_dial.analysis.training.decompose import decompose_with_intervals

    runs, inputs = [], {"samples": [str(base)], "responses": [], "terms": []}
    for dial, lift in (("grpo", 1.0), ("dr_grpo", 0.0)):
        for seed in (0, 1, 2):
            runs.append([dial, seed])
            inputs["samples"].append(str(base))  # the untrained policy stands in for each run
            resp = _responses(seed, lift)
            inputs["responses"].append(str(tmp_path / f"{dial}{seed}.parquet"))
            write_table(resp, inputs["responses"][-1])
            terms = decompose_with_intervals(resp, [0], [9], n_boot=20)
            inputs["terms"].append(str(tmp_path / f"{dial}{seed}.csv"))
            write_table(terms, inputs["terms"][-1])
    inputs["passrates"] = str(tmp_path / "passrates.parquet")
    table = pd.DataFrame({"prompt_id": ["p0", "p1"], "source": "arithmetic", "difficulty": "o2d1",
                          "n": 8, "k": [4, 2], "p_hat": [0.5, 0.25], "mean_len_correct": 5.0,
                          "mean_len_incorrect": 5.0})  # fmt: skip
    write_table(table, inputs["passrates"])
    out = {name: str(tmp_path / f"out/{name}.csv") for name in ("channel", "runs", "drift")}
    out["awareness"] = str(tmp_path / "out/awareness.parquet")
    dials = {  # the fields read_arm resolves at DAG build
        name: read_arm({"preset": name}, max_new_tokens=12).dial.as_dict()
        for name in ("grpo", "dr_grpo")
    }
    channel.channel_summary(inputs, out, {"runs": runs, "dials": dials, "group_size": 8,
                                          "max_new_tokens": 12, "window_fraction": 0.1,
                                          "reference": "grpo"})  # fmt: skip
    drift = read_table(out["drift"]).set_index(["quantity", "dial"])
    assert drift.loc[("gap_drift", "grpo"), "mean"] == pytest.approx(9.0, abs=3)  # 1 char/step
    assert drift.loc[("gap_drift", "grpo"), "lo"] > 0
    assert drift.loc[("gap_drift", "dr_grpo"), "predicted_hi"] == 0  # constant normalizer
    assert drift.loc[("gap_drift", "dr_grpo"), "length_norm"] == "constant"
    assert len(read_table(out["channel"])) == 1 + len(runs)

    figs = {k: str(tmp_path / f"fig/{k}.png") for k in ("channel_png", "drift_png")}
    drawn, save = [], figures.save
    monkeypatch.setattr(figures, "save", lambda fig, *paths: (drawn.append(fig), save(fig, *paths)))
    channel.channel_figures(out, figs, {"reference": "grpo"})
    assert all(Path(p).stat().st_size > 0 for p in figs.values())
    shown = [display_names()["grpo"], display_names()["dr_grpo"]]  # the stage passes the one table
    assert [t.get_text() for t in drawn[0].axes[3].get_xticklabels()] == ["base", *shown]
    assert [t.get_text() for t in drawn[1].axes[0].get_xticklabels()] == [*shown, "predicted"]


def test_a_task_without_tail_is_refused(tmp_path: Path) -> None:
    params = _params(task={"name": "arithmetic", "options": {}})
    with pytest.raises(ValueError, match="needs a task with a checking tail"):
        channel.channel_samples({"model": "unused"}, {"samples": str(tmp_path / "x")}, params)

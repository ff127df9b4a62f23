"""TRL's completions files as snapshots of one window (overlap, eval steps from trainer_state),
repeated prompts cut into groups of G, tool-call turns (TRL >= 1.15) and weighted rewards, on
files written the way GRPOTrainer.log writes them: pd.DataFrame(table).to_parquet."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from grpo_dial.external.groups import assign_groups
from grpo_dial.external.importers import import_run
from grpo_dial.external.trl_snapshots import (
    every_eval_steps,
    logged_eval_steps,
    overlap,
    row_keys,
)


def _write(root, step, rows):
    """rows: (prompt, completion, reward) -> completions_<step>.parquet as GRPOTrainer.log."""
    table = {
        "step": [step] * len(rows),
        "prompt": [r[0] for r in rows],
        "completion": [r[1] for r in rows],
        "acc": [r[2] for r in rows],
        "advantage": [0.0] * len(rows),
    }
    (root / "completions").mkdir(parents=True, exist_ok=True)
    pd.DataFrame(table).to_parquet(root / "completions" / f"completions_{step:05d}.parquet")


def test_overlap_is_the_longest_tail_that_starts_the_next_file():
    a = np.array([1, 2, 3, 4], np.uint64)
    assert overlap(a, a) == 4
    assert overlap(a, np.array([3, 4, 9, 9], np.uint64)) == 2
    assert overlap(a, np.array([9, 9, 9, 9], np.uint64)) == 0
    assert overlap(np.array([1, 1, 1], np.uint64), np.array([1, 1, 5], np.uint64)) == 2
    assert overlap(a[:0], a) == 0


def test_row_keys_ignore_the_step_and_see_message_contents():
    df = pd.DataFrame({"step": [1, 2], "prompt": [[{"content": "a"}], [{"content": "a"}]]})
    keys = row_keys(df)
    assert keys[0] == keys[1]
    other = row_keys(df.assign(prompt=[[{"content": "a"}], [{"content": "b"}]]))
    assert other[0] != other[1]


def test_eval_steps_from_trainer_state_and_from_eval_steps(tmp_path):
    assert logged_eval_steps(tmp_path) is None
    state = {"global_step": 4, "log_history": [{"loss": 1, "step": 2}, {"eval_loss": 0, "step": 2},
             {"loss": 1, "step": 4}]}  # fmt: skip
    (tmp_path / "checkpoint-4").mkdir()
    (tmp_path / "checkpoint-4" / "trainer_state.json").write_text(json.dumps(state))
    assert logged_eval_steps(tmp_path) == {2}
    (tmp_path / "trainer_state.json").write_text("{broken")
    with pytest.raises(ValueError, match="cannot read .*trainer_state.json"):
        logged_eval_steps(tmp_path)
    assert every_eval_steps(3, [1, 2, 3, 4, 5, 6, 7]) == {3, 6, 7}  # and the last step
    assert every_eval_steps([2, 5], [1, 2]) == {2, 5}
    with pytest.raises(ValueError, match="positive"):
        every_eval_steps(0, [1])


def test_eval_on_a_generation_step_keeps_the_tail_of_its_batch(tmp_path):
    """Generations at steps 1 and 3 (8 rows each), evaluation (4 rows) at 2 and 3: file 3 holds
    gen 3's last 4 rows and the eval rows; its first 4 rows were overwritten."""
    gen1 = [(f"p{i // 4}", f"a{i}", 1.0) for i in range(8)]
    gen3 = [(f"q{i // 4}", f"b{i}", float(i % 2)) for i in range(8)]
    ev2 = [("e", f"x{i}", 1.0) for i in range(4)]
    ev3 = [("e", f"y{i}", 0.0) for i in range(4)]
    _write(tmp_path, 1, gen1)
    _write(tmp_path, 2, gen1[4:] + ev2)
    _write(tmp_path, 3, gen3[4:] + ev3)
    _write(tmp_path, 4, gen3[4:] + ev3)
    rows, report = import_run({"format": "trl", "path": str(tmp_path), "eval_steps": [2, 3]})
    kept = [f"a{i}" for i in range(8)] + [f"b{i}" for i in (4, 5, 6, 7)]
    assert rows["response"].tolist() == kept
    assert report.skipped == {"repeated": 4 + 8, "eval": 8}
    assert "4 training row(s) overwritten" in str(report)


def test_groups_split_only_runs_made_of_whole_groups():
    step = pd.Series([1] * 10)
    # A A A A A A A A B B: A twice, adjacent -> two groups of 4
    group, size, n_split = assign_groups(step, pd.Series(list("AAAAAAAABB")), 4, True)
    assert group.tolist() == [0, 0, 0, 0, 1, 1, 1, 1, 2, 2] and size == 4 and n_split == 1
    # interleaved A B A ...: no order to split by, A stays one group of 8
    prompts = pd.Series(list("ABABABABAA"))
    group, _, n_split = assign_groups(step, prompts, 4, True)
    assert len(set(group[prompts == "A"])) == 1 and n_split == 0
    # without contiguity (verl, generic) never split; G inferred as the most common size
    group, size, _ = assign_groups(step, pd.Series(list("AAAAAAAABB")), None, False)
    assert group.tolist() == [0] * 8 + [1, 1] and size == 2
    with pytest.raises(ValueError, match="group_size"):
        assign_groups(step, prompts, 0, True)


def test_tool_call_turns_are_read_and_tool_outputs_left_out_of_the_length(tmp_path):
    """TRL >= 1.15 with tools: the first assistant turn only calls a tool (content null), then
    the tool's message (role tool, grpo_trainer.py 2019), then the answer (1.16: 2171-2182)."""
    call = {"type": "function", "function": {"name": "multiply", "arguments": {"a": 3, "b": 4}}}
    with_tool = [
        {"role": "assistant", "content": None, "reasoning_content": "think", "tool_calls": [call]},
        {"role": "tool", "name": "multiply", "content": "12 (a long tool output)"},
        {"role": "assistant", "content": "It is 12."},
    ]
    plain = [{"role": "assistant", "content": "It is 13."}]
    prompt = [{"role": "user", "content": "3*4?"}]
    _write(tmp_path, 1, [(prompt, with_tool, 1.0), (prompt, plain, 0.0)])
    rows, report = import_run({"format": "trl", "path": str(tmp_path)})
    assert report.skipped == {} and len(rows) == 2
    generated = rows["response"].iloc[0]
    assert "think" in generated and "multiply" in generated and "It is 12." in generated
    assert "tool output" not in generated
    assert rows["length"].tolist() == [len(generated), len("It is 13.")]
    assert "tool calls of the assistant turns; 1 tool output message(s) left out" in str(report)


def test_reward_weights_weigh_the_reward_columns_as_trl_does(tmp_path):
    table = pd.DataFrame({"step": [1] * 4, "prompt": ["p"] * 4, "completion": list("abcd"),
                          "acc": [1.0, 0.0, 1.0, np.nan], "fmt": [1.0, 1.0, 0.0, np.nan],
                          "advantage": 0.0})  # fmt: skip
    (tmp_path / "completions").mkdir()
    table.to_parquet(tmp_path / "completions" / "completions_00001.parquet")
    spec = {"format": "trl", "path": str(tmp_path), "reward_column": ["acc", "fmt"]}
    rows, report = import_run({**spec, "reward_weights": [1.0, 0.2], "threshold": 0.5})
    assert rows["raw_reward"].tolist() == pytest.approx([1.2, 0.2, 1.0])  # all-NaN row skipped
    assert rows["correct"].tolist() == [True, False, True]
    assert report.skipped == {"missing_value": 1} and "1*acc + 0.2*fmt" in str(report)
    with pytest.raises(ValueError, match="reward_weights needs reward_column as a list"):
        import_run({**spec, "reward_column": "acc", "reward_weights": [1.0]})


def test_a_trainer_state_with_a_bad_step_fails_in_one_line(tmp_path):
    state = {"global_step": 2, "log_history": [{"eval_loss": 0.1, "step": "two"}]}
    (tmp_path / "trainer_state.json").write_text(json.dumps(state))
    with pytest.raises(ValueError, match="not an integer"):
        logged_eval_steps(tmp_path)
    (tmp_path / "trainer_state.json").write_text(json.dumps([1, 2]))
    with pytest.raises(ValueError, match="not a trainer state"):
        logged_eval_steps(tmp_path)

"""Tests for grpo_dial.data.tasks.math: splits, prompts, demonstrations and verification on real
data.
"""

from __future__ import annotations

import json
import logging
import string

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from grpo_dial.data.tasks import TASKS, MathTask, Problem, Task, get_task
from grpo_dial.data.tasks.math import DEFAULT_TEMPLATE

RNG = np.random.default_rng(0)


@pytest.fixture(scope="module")
def task(shared_data):
    t = get_task(
        "math",
        train=[
            {"dataset": "gsm8k", "path": str(shared_data / "gsm8k/train.jsonl"), "n": 300},
            {"dataset": "math500", "path": str(shared_data / "math500/test.jsonl"), "levels": [1]},
        ],
        heldout=[{"dataset": "gsm8k", "path": str(shared_data / "gsm8k/test.jsonl"), "n": 100}],
        verify_timeout=30.0,
    )
    yield t
    t.verifier.close()


def write_jsonl(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return str(path)


def test_registered_and_protocol(task):
    assert TASKS["math"] is MathTask
    assert isinstance(task, Task)
    assert task.name == "math" and task.styles == ("solution",)
    assert task.alphabet == string.printable
    p = task.problems("train", 1, 0)[0]
    assert task.length_split(p, "anything") is None


def test_problems_from_the_mix(task):
    train = task.problems("train", 343, 0)
    assert len(train) == 343 and len({p.prompt_id for p in train}) == 343
    by_label = {}
    for p in train:
        by_label[p.difficulty] = by_label.get(p.difficulty, 0) + 1
    assert by_label == {"gsm8k": 300, "level1": 43}
    table = task.pools()["train"].set_index("prompt_id")
    for p in train[:20]:
        row = table.loc[p.prompt_id]
        assert p.prompt == DEFAULT_TEMPLATE.replace("{problem}", row["problem"])
        assert (p.reference, p.difficulty) == (row["reference"], row["difficulty"])
    assert train[0].prompt.endswith("put your final answer within \\boxed{}.")


def test_draws_are_seeded_and_splits_disjoint(task):
    a, b = task.problems("train", 50, 3), task.problems("train", 50, 3)
    assert a == b
    assert [p.prompt_id for p in task.problems("train", 50, 4)] != [p.prompt_id for p in a]
    heldout = task.problems("heldout", 100, 0)
    assert not {p.prompt_id for p in heldout} & {
        p.prompt_id for p in task.problems("train", 343, 0)
    }
    assert {p.prompt_id for p in task.problems("eval", 100, 0)} == {p.prompt_id for p in heldout}


def test_too_many_problems_warns_and_returns_all(task, caplog):
    with caplog.at_level(logging.WARNING, logger="grpo_dial"):
        got = task.problems("heldout", 1000, 0)
    assert len(got) == 100 and "asked for 1000 heldout problems, the pool holds 100" in caplog.text


def test_demonstrations_verify_and_others_do_not(task):
    """Every worked solution is right for its own problem; shifted by one it is (almost) wrong."""
    problems = task.problems("train", 60, 1)
    demos = [task.demonstration(p, "solution", RNG) for p in problems]
    assert all(task.verify(p, d, True).correct for p, d in zip(problems, demos, strict=True))
    shifted = [task.verify(p, d, True).correct for p, d in zip(problems, demos[1:], strict=False)]
    same = [p.reference == q.reference for p, q in zip(problems, problems[1:], strict=False)]
    assert shifted == same
    gsm = next(p for p in problems if p.difficulty == "gsm8k")
    demo = task.demonstration(gsm, "solution", RNG)
    assert "<<" not in demo and demo.endswith(f"The final answer is $\\boxed{{{gsm.reference}}}$.")


def test_verify_contract(task):
    p = Problem("x", "What is half of one?", "\\frac{1}{2}", "level1")
    before = task.verify_counts()
    assert task.verify(p, "It is \\boxed{0.5}", True).correct
    v = task.verify(p, "It is \\boxed{0.5}", False)
    assert (v.correct, v.truncated, v.answer) == (False, True, None)
    v = task.verify(p, "no idea", True)
    assert (v.correct, v.truncated, v.answer) == (False, False, None)
    after = task.verify_counts()
    assert after["checks"] - before["checks"] == 2 and after["no_answer"] - before["no_answer"] == 1
    with pytest.raises(ValueError, match="response must be a str"):
        task.verify(p, None, True)
    broken = Problem("y", "What is it?", "\\frac{", "level1")  # a reference that does not parse
    assert not task.verify(broken, "It is \\boxed{1}", True).correct
    assert task.verify_counts()["bad_references"] - after["bad_references"] == 1


def test_overlap_removed_from_train(tmp_path, caplog):
    rows = [{"question": f"Q{i}: what is {i} + 1?", "answer": f"#### {i + 1}"} for i in range(10)]
    train = write_jsonl(tmp_path / "train.jsonl", rows)
    held = write_jsonl(tmp_path / "held.jsonl", [{**rows[2], "question": "  q2: what is 2 + 1? "}])
    ev = write_jsonl(tmp_path / "eval.jsonl", rows[2:5])
    t = MathTask(
        train=[{"dataset": "gsm8k", "path": train}],
        heldout=[{"dataset": "gsm8k", "path": held}],
        eval=[{"dataset": "gsm8k", "path": ev}],
        prompt_template="Solve: {problem} Answer in \\boxed{}.",
    )
    with caplog.at_level(logging.INFO, logger="grpo_dial"):
        got = {s: t.problems(s, 100, 0) for s in ("train", "eval", "heldout")}
    assert "removed 1 eval problems" in caplog.text and "removed 3 train problems" in caplog.text
    assert sorted(p.reference for p in got["train"]) == ["1", "10", "2", "6", "7", "8", "9"]
    assert sorted(p.reference for p in got["eval"]) == ["4", "5"]
    assert [p.reference for p in got["heldout"]] == ["3"]
    assert got["heldout"][0].prompt == "Solve: q2: what is 2 + 1? Answer in \\boxed{}."


def test_bigmath_has_no_demonstration(tmp_path):
    table = pa.table(
        {
            "problem": ["What is 2+2?"],
            "answer": ["4"],
            "source": ["math"],
            "domain": [["Mathematics -> Algebra"]],
            "llama8b_solve_rate": [0.5],
        }
    )
    pq.write_table(table, tmp_path / "bm.parquet")
    held = write_jsonl(tmp_path / "h.jsonl", [{"question": "1+1?", "answer": "#### 2"}])
    t = MathTask(
        train=[{"dataset": "bigmath", "path": str(tmp_path / "bm.parquet")}],
        heldout=[{"dataset": "gsm8k", "path": held}],
    )
    p = t.problems("train", 1, 0)[0]
    assert p.difficulty == "sr0.4-0.6"
    with pytest.raises(ValueError, match="has no worked solution"):
        t.demonstration(p, "solution", RNG)
    with pytest.raises(ValueError, match="style='terse' is not valid"):
        t.demonstration(p, "terse", RNG)


G = {"dataset": "gsm8k", "path": "x.jsonl"}  # a spec that is checked, never read


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"train": [], "heldout": [G]}, "needs at least one source spec"),
        ({"train": G, "heldout": []}, "must be a list of source specs"),
        ({"train": [{"dataset": "gsm8k", "levels": [1]}], "heldout": [G]},
         "unknown key(s) levels in gsm8k spec"),
        ({"train": [G], "heldout": [G],
          "prompt_template": "no slot"}, "must contain '{problem}' exactly once"),
        ({"train": [G], "heldout": [G],
          "verify_timeout": -1}, "verify timeout must be a number of seconds > 0"),
        ({"train": [G], "heldout": [G], "size": 3},
         "unknown option 'size' for task 'math'"),
    ],
)  # fmt: skip
def test_bad_options_raise_one_line(options, message):
    with pytest.raises(ValueError) as err:
        get_task("math", **options)
    assert message in str(err.value) and "\n" not in str(err.value)


def test_bad_problem_arguments(task):
    with pytest.raises(ValueError, match="split='test' is not valid"):
        task.problems("test", 1, 0)
    with pytest.raises(ValueError, match="n must be an integer >= 0"):
        task.problems("train", -1, 0)

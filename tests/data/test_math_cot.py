"""math_cot_100: one reader and validator for the pass-rate and the real-length tables; ids
shared with MATH-500."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from grpo_dial.analysis import real_lengths
from grpo_dial.data.math_cot import MATH_COT_MODEL, level_label, read_math_cot
from grpo_dial.data.math_problems import load_source
from grpo_dial.passrates import loaders as passrate_loaders

MATH_COT = Path("math_cot_100/math_cot_100.jsonl")


def test_real_file_and_ids_shared_with_math500(shared_data: Path) -> None:
    responses, report = read_math_cot(shared_data / MATH_COT)
    assert (len(responses), report.n_kept, report.n_dropped) == (800, 100, 0)
    assert set(responses["model"]) == {MATH_COT_MODEL} and responses["correct"].sum() == 728
    spec = {"dataset": "math500", "path": str(shared_data / "math500/test.jsonl")}
    math500, _ = load_source(spec)
    shared = set(responses["prompt_id"]) & set(math500["prompt_id"])
    assert len(shared) == 5  # the 5 problems both files hold, found by id alone
    cot_questions = {json.loads(x)["question"] for x in (shared_data / MATH_COT).open()}
    assert set(math500.loc[math500["prompt_id"].isin(shared), "problem"]) <= cot_questions


@pytest.mark.parametrize(
    ("value", "label"),
    [("Level 3", "level 3"), ("level  5 ", "level 5"), ("Level 9", None), (3, None), (None, None)],
)
def test_level_label(value: object, label: str | None) -> None:
    assert level_label(value) == label


def test_both_consumers_drop_the_same_rows(tmp_path: Path) -> None:
    def row(level: object = "Level 2", score: object = (True, False)) -> str:
        return json.dumps(
            {"question": "q", "level": level, "response": ["ab", "abcd"], "score": list(score)}
        )

    path = tmp_path / "m.jsonl"
    path.write_text("\n".join([row(), row(level="Level 9"), row(score=[True]), "[]", row()]))
    table, report = passrate_loaders.load_math_cot(path)
    loaded = real_lengths.load_math_cot_responses(path)
    assert report.dropped == {"malformed": 2, "invalid_json": 1}
    assert loaded.skipped == tuple(report.skipped) and loaded.n_problems == len(table) == 2
    assert "line 4: not a JSON object" in report.skipped[0]  # found while reading, before checks
    assert "line 2: column 'level'" in report.skipped[1]
    assert "line 3: column 'score': 1 scores for 2 responses" in report.skipped[2]
    assert table["prompt_id"].tolist()[1] == table["prompt_id"].tolist()[0] + "-1"
    assert loaded.responses["problem_id"].unique().tolist() == ["math_cot_100:1", "math_cot_100:5"]


@pytest.mark.parametrize("text", ["", '{"question": "q", "level": 1}\n'])
def test_an_empty_or_unusable_file_fails_naming_it(tmp_path: Path, text: str) -> None:
    """No usable row: the reading rule fails here, naming the file, not a later rule."""
    path = tmp_path / "math_cot_100.jsonl"
    path.write_text(text)
    with pytest.raises(ValueError, match="no usable row") as err:
        read_math_cot(path)
    assert str(path) in str(err.value) and "\n" not in str(err.value)

"""GSM8K: the logged-solutions reader (one reader for the pass-rate and the real-length tables),
its validator, and ids shared with the GSM8K test problems."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from grpo_dial.analysis import real_lengths
from grpo_dial.data import gsm8k
from grpo_dial.data.gsm8k import GSM8K_MODELS, read_gsm8k_solutions
from grpo_dial.data.math_problems import load_source
from grpo_dial.data.reading import LOGGED_COLUMNS
from grpo_dial.passrates import loaders as passrate_loaders

SOLUTIONS = Path("gsm8k/example_model_solutions.jsonl")


def _row(question: str, correct: list[bool]) -> dict:
    row: dict = {"question": question, "ground_truth": "1"}
    for m, c in zip(GSM8K_MODELS, correct, strict=True):
        row[m] = {"is_correct": c, "solution": "s" * (3 if c else 7)}
    return row


@pytest.fixture
def messy(tmp_path: Path) -> Path:
    no_model = _row("q3", [True] * 4)
    del no_model["175b_verification"]
    str_flag = _row("q4", [True] * 4)
    str_flag["6b_finetuning"]["is_correct"] = "true"
    lines = [
        json.dumps(_row("q1", [True, False, False, True])),
        "{not json",
        "",
        json.dumps(no_model),
        json.dumps(str_flag),
        json.dumps({**_row("q5", [False] * 4), "question": 5}),
        json.dumps(_row("q1", [True] * 4)),  # a repeated question
    ]
    path = tmp_path / "solutions.jsonl"
    path.write_text("\n".join(lines) + "\n")
    return path


def test_real_file_ids_match_the_test_problems(shared_data: Path) -> None:
    responses, report = read_gsm8k_solutions(shared_data / SOLUTIONS)
    assert list(responses.columns) == list(LOGGED_COLUMNS)
    assert (len(responses), report.n_kept, report.n_dropped) == (5276, 1319, 0)
    assert responses["correct"].sum() == 2001
    test, _ = load_source({"dataset": "gsm8k", "path": str(shared_data / "gsm8k/test.jsonl")})
    assert list(responses["prompt_id"].drop_duplicates()) == list(test["prompt_id"])


def test_validator_names_file_line_and_column(messy: Path) -> None:
    responses, report = read_gsm8k_solutions(messy)
    assert (report.n_read, report.n_kept) == (6, 2)
    assert report.dropped == {"invalid_json": 1, "malformed": 3}
    assert report.skipped[1:] == [
        f"{messy}: line 4: column '175b_verification': missing or not an object",
        f"{messy}: line 5: column '6b_finetuning': is_correct must be a bool, got 'true'",
        f"{messy}: line 6: column 'question': missing or not a string",
    ]
    assert responses["line"].unique().tolist() == [1, 7]
    ids = responses["prompt_id"].unique().tolist()
    assert ids[1] == ids[0] + "-1"  # the repeat is numbered, not merged


def test_both_consumers_keep_the_same_rows(messy: Path) -> None:
    table, report = passrate_loaders.load_gsm8k_solutions(messy)
    loaded = real_lengths.load_gsm8k_responses(messy)
    assert loaded.skipped == tuple(report.skipped) and loaded.n_problems == len(table)
    per_problem = loaded.responses.groupby("problem_id", sort=False)["correct"].sum()
    assert per_problem.tolist() == table["k"].tolist() == [2, 4]
    assert loaded.responses["difficulty"].drop_duplicates().tolist() == ["k=2", "k=4"]


def test_consumers_read_through_the_reader(messy: Path, monkeypatch) -> None:
    """Swap the reader: a consumer that parsed the file its own way would not see the swap."""
    fake = pd.DataFrame(
        {
            "prompt_id": ["gsm8k-x"] * 4,
            "line": [9] * 4,
            "difficulty": [pd.NA] * 4,
            "model": list(GSM8K_MODELS),
            "correct": [True, True, True, False],
            "response": ["a", "bb", "ccc", "dddd"],
        }
    )
    calls = []

    def reader(path):
        calls.append(path)
        return fake, gsm8k.LoadReport(name="fake", n_kept=1)

    monkeypatch.setattr(passrate_loaders, "read_gsm8k_solutions", reader)
    monkeypatch.setattr(real_lengths, "read_gsm8k_solutions", reader)
    table, _ = passrate_loaders.load_gsm8k_solutions(messy)
    assert table["prompt_id"].tolist() == ["gsm8k-x"] and table["k"].tolist() == [3]
    assert table["mean_len_correct"].tolist() == [2.0]
    loaded = real_lengths.load_gsm8k_responses(messy)
    assert loaded.responses["problem_id"].unique().tolist() == ["gsm8k:9"]
    assert len(calls) == 2


def test_problems_reference_and_solution() -> None:
    df = pd.DataFrame(
        {"question": [" Q1 ", "Q2"], "answer": ["a <<1+1=2>>2\n#### 1,000", "no marker"]}
    )
    out, passes = gsm8k.gsm8k_problems(df)
    assert out["problem"].tolist() == ["Q1", "Q2"] and out["id_text"].tolist() == [" Q1 ", "Q2"]
    assert out["reference"].tolist() == ["1000", ""] and out["solution"].tolist()[0] == "a 2"
    assert passes.all()


@pytest.mark.parametrize("text", ["", "\n\n", '{"question": 3}\n'])
def test_an_empty_or_unusable_file_fails_naming_it(tmp_path: Path, text: str) -> None:
    """No usable row: the reading rule fails here, naming the file, not a later rule."""
    path = tmp_path / "example_model_solutions.jsonl"
    path.write_text(text)
    with pytest.raises(ValueError, match="no usable row") as err:
        read_gsm8k_solutions(path)
    assert str(path) in str(err.value) and "\n" not in str(err.value)

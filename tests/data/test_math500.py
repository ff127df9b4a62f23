"""MATH-500 adapter: levels in either spelling, filters, ids hashed from the text as given."""

from __future__ import annotations

import hashlib

import numpy as np
import pandas as pd

from grpo_dial.data.math500 import level_numbers, math500_problems
from grpo_dial.data.math_problems import load_source


def test_levels_and_filters() -> None:
    df = pd.DataFrame(
        {
            "problem": ["a", "b", "c"],
            "answer": ["1", "2", "3"],
            "level": [1, "Level 3", "hard"],
            "subject": ["Algebra", "Geometry", "Algebra"],
        }
    )
    np.testing.assert_array_equal(level_numbers(df["level"]), [1, 3, np.nan])
    out, keep = math500_problems(df)
    assert out["difficulty"].tolist() == ["level1", "level3", "unknown"] and keep.all()
    _, keep = math500_problems(df, levels=[3], subjects=["Geometry", "Algebra"])
    assert keep.tolist() == [False, True, False]
    _, keep = math500_problems(df, subjects=["Algebra"])
    assert keep.tolist() == [True, False, True]


def test_id_hashes_the_text_as_given(tmp_path) -> None:
    text = "  What is $1+1$?\n"
    pd.DataFrame({"problem": [text], "answer": ["2"], "level": [1]}).to_parquet(
        tmp_path / "test.parquet"
    )
    table, _ = load_source({"dataset": "math500", "path": str(tmp_path)})
    assert table["problem"].tolist() == ["What is $1+1$?"]
    assert table["prompt_id"].tolist() == ["math-" + hashlib.sha1(text.encode()).hexdigest()[:16]]

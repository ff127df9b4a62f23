"""The pass-rate schema: validation names the first bad column and row, parquet round trip."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from grpo_dial.passrates.tables import read_passrates, validate_passrates, write_passrates


def _one_line_error(excinfo: pytest.ExceptionInfo) -> str:
    message = str(excinfo.value)
    assert "\n" not in message
    return message


# --------------------------------------------------------------------------- schema


def _tiny() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "prompt_id": ["a", "b", "c"],
            "source": ["s", "s", "s"],
            "difficulty": [None, "level 1", None],
            "n": [1, 4, 8],
            "k": [1, 0, 3],
            "p_hat": [1.0, 0.0, 0.375],
            "mean_len_correct": [3.0, np.nan, 5.5],
            "mean_len_incorrect": [np.nan, 2.0, 1.0],
        }
    )


@pytest.mark.parametrize(
    ("column", "value", "pattern"),
    [
        ("k", [1, 5, 3], "column 'k' row 1: k = 5 outside"),
        ("k", [1, -1, 3], "column 'k' row 1"),
        ("n", [0, 4, 8], "column 'n' row 0"),
        ("n", [1, 4.5, 8], "column 'n' row 1: not an integer"),
        ("p_hat", [1.0, 0.0, 0.5], "column 'p_hat' row 2"),
        ("prompt_id", ["a", "b", "a"], "column 'prompt_id' row 2: duplicate id 'a'"),
        ("source", ["s", None, "s"], "column 'source' row 1: null"),
        ("mean_len_correct", [1.0, -2.0, 1.0], "column 'mean_len_correct' row 1"),
    ],
)
def test_validate_names_first_bad_column_and_row(column: str, value: list, pattern: str) -> None:
    bad = _tiny().assign(**{column: value})
    with pytest.raises(ValueError, match=pattern) as info:
        validate_passrates(bad)
    _one_line_error(info)


def test_validate_missing_column_and_round_trip(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="column 'k'.*missing"):
        validate_passrates(_tiny().drop(columns="k"))
    table = validate_passrates(_tiny())
    write_passrates(table, tmp_path / "out" / "t.parquet")
    back = read_passrates(tmp_path / "out" / "t.parquet")
    pd.testing.assert_frame_equal(back, table)
    assert back["difficulty"].isna().tolist() == [True, False, True]
    with pytest.raises(ValueError, match="column 'k'"):
        write_passrates(_tiny().assign(k=[2, 0, 3]), tmp_path / "bad.parquet")
    assert not (tmp_path / "bad.parquet").exists()
    with pytest.raises(ValueError, match="missing.parquet"):
        read_passrates(tmp_path / "missing.parquet")


def test_extra_columns_ride_along_after_the_schema() -> None:
    table = pd.DataFrame(
        {
            "prompt_id": ["a"],
            "source": ["s"],
            "difficulty": [None],
            "n": [4],
            "k": [1],
            "p_hat": [0.25],
            "mean_len_correct": [3.0],
            "mean_len_incorrect": [np.nan],
            "wilson_lo": [0.05],
        }
    )
    out = validate_passrates(table)
    assert list(out.columns[-1:]) == ["wilson_lo"] and out["wilson_lo"].iloc[0] == 0.05

"""Tests for grpo_dial.tables: one reader and one writer for every tidy table."""

from __future__ import annotations

import pandas as pd
import pytest

from grpo_dial.tables import read_table, write_table


@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
def test_round_trip_creates_folders_and_keeps_values(tmp_path, suffix):
    frame = pd.DataFrame({"dial": ["grpo", "dapo"], "seed": [0, 1], "value": [0.25, -1.5]})
    path = tmp_path / "deep" / "er" / f"table{suffix}"
    write_table(frame, path)
    pd.testing.assert_frame_equal(read_table(path), frame)


def test_unknown_suffix_and_missing_table_fail_with_one_line(tmp_path):
    with pytest.raises(ValueError, match=r"unsupported table suffix '\.xlsx'.*use \.csv"):
        write_table(pd.DataFrame({"a": [1]}), tmp_path / "t.xlsx")
    with pytest.raises(ValueError, match="table not found: .*nope.csv"):
        read_table(tmp_path / "nope.csv")

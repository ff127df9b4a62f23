"""Big-Math: the one reader (file, directory, hub id, errors), null against NaN solve rates, the
domain hierarchy and the solve-rate bands."""

from __future__ import annotations

from pathlib import Path

import datasets
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from grpo_dial.data.bigmath import (
    BIGMATH_BANDS,
    band_label,
    bigmath_problems,
    domain_hit,
    read_bigmath,
    solve_rates,
)


def _raw() -> pa.Table:
    return pa.table(
        {
            "problem": pa.array([" p0", "p1", "p2"], pa.string()),
            "answer": pa.array([1, 2, 3], pa.int64()),
            "source": pa.array(["math", None, "olympiads"], pa.string()),
            "domain": pa.array(
                [["Mathematics -> Algebra -> X"], ["Mathematics -> Algebraic Geometry"], None],
                pa.list_(pa.string()),
            ),
            "llama8b_solve_rate": pa.array([0.5, None, float("nan")], pa.float64()),
        }
    )


def test_band_labels_at_edges():
    rates = np.array([0.0, 0.1999, 0.2, 0.4, 0.79, 0.8, 1.0, -0.1, 1.5, np.nan])
    assert band_label(rates).tolist() == [
        "sr0.0-0.2", "sr0.0-0.2", "sr0.2-0.4", "sr0.4-0.6", "sr0.6-0.8", "sr0.8-1.0",
        "sr0.8-1.0", "unknown", "unknown", "unknown",
    ]  # fmt: skip
    assert BIGMATH_BANDS[0] == 0 and BIGMATH_BANDS[-1] == 1


def test_null_and_nan_rates_stay_apart_and_domains_nest() -> None:
    raw = _raw()
    rate, null = solve_rates(raw)
    assert null.tolist() == [False, True, False] and np.isnan(rate[1:]).all()
    no_rate, all_null = solve_rates(raw.drop_columns(["llama8b_solve_rate"]))
    assert np.isnan(no_rate).all() and all_null.all()
    hit = domain_hit(raw.column("domain").to_pandas(), ["Mathematics -> Algebra"])
    assert hit.tolist() == [True, False, False]  # "Algebraic Geometry" is not below "Algebra"


def test_problems_adapter() -> None:
    out, keep = bigmath_problems(_raw(), sources=["math", "olympiads"], solve_rate=(0.0, 1.0))
    assert out["problem"].tolist() == ["p0", "p1", "p2"] and out["id_text"][0] == " p0"
    assert out["reference"].tolist() == ["1", "2", "3"]  # integer answers as text
    assert out["source"].tolist() == ["math", "bigmath", "olympiads"]
    assert keep.tolist() == [True, False, False]  # p1: source null; p2: NaN rate
    with pytest.raises(ValueError, match="lacks column.*domain"):
        bigmath_problems(_raw().drop_columns(["domain"]), domains=["x"])


def test_reader_file_directory_and_errors(tmp_path: Path, monkeypatch) -> None:
    pq.write_table(_raw(), tmp_path / "one.parquet")
    (tmp_path / "d" / "e").mkdir(parents=True)
    pq.write_table(_raw().slice(0, 1), tmp_path / "d" / "e" / "b.parquet")
    pq.write_table(_raw().slice(1), tmp_path / "d" / "a.parquet")
    assert read_bigmath(tmp_path / "one.parquet").num_rows == 3
    assert read_bigmath(tmp_path / "d").column("problem").to_pylist() == ["p1", "p2", " p0"]
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="no parquet files under directory"):
        read_bigmath(tmp_path / "empty")
    with pytest.raises(ValueError, match="file not found: a/b/c.parquet .*nor a URL or hub id"):
        read_bigmath("a/b/c.parquet")
    (tmp_path / "bad.parquet").write_text("not parquet")
    with pytest.raises(ValueError, match="could not read bigmath data") as err:
        read_bigmath(tmp_path / "bad.parquet")
    assert "\n" not in str(err.value)

    def offline(*args, **kwargs):
        raise ConnectionError("no network\ntraceback")

    monkeypatch.setattr(datasets, "load_dataset", offline)
    with pytest.raises(ValueError, match="'owner/name': ConnectionError: no network$"):
        read_bigmath("owner/name")
    hub_rows = pd.DataFrame({"problem": ["h"], "llama8b_solve_rate": [0.25]})
    monkeypatch.setattr(
        datasets, "load_dataset", lambda *a, **k: datasets.Dataset.from_pandas(hub_rows)
    )
    assert read_bigmath("owner/name").column("problem").to_pylist() == ["h"]

"""Pass-rate loaders over the data readers: real logged files, malformed rows, a Big-Math-schema
fixture, the spec dispatcher."""

from __future__ import annotations

import json
import math
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from grpo_dial.data.gsm8k import GSM8K_MODELS
from grpo_dial.data.reading import LoadReport
from grpo_dial.passrates.loaders import (
    load_bigmath,
    load_gsm8k_solutions,
    load_math_cot,
    load_passrates,
)
from grpo_dial.passrates.tables import PASSRATE_COLUMNS


def _one_line_error(excinfo: pytest.ExceptionInfo) -> str:
    message = str(excinfo.value)
    assert "\n" not in message
    return message


# --------------------------------------------------------------------------- real logged data


def _jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_gsm8k_solutions_reproduce_k_histogram(shared_data: Path) -> None:
    path = shared_data / "gsm8k" / "example_model_solutions.jsonl"
    table, report = load_gsm8k_solutions(path)
    assert report.n_read == report.n_kept == 1319 and report.dropped == {}
    assert list(table.columns) == list(PASSRATE_COLUMNS)
    assert table["k"].value_counts().to_dict() == {0: 432, 1: 290, 2: 236, 3: 205, 4: 156}
    assert (table["n"] == 4).all() and table["difficulty"].isna().all()
    assert (table["source"] == "gsm8k").all() and table["prompt_id"].is_unique
    # lengths by correctness, recomputed row by row from the raw objects
    for row, raw in zip(table.itertuples(), _jsonl(path), strict=True):
        by = {True: [], False: []}
        for m in GSM8K_MODELS:
            by[raw[m]["is_correct"]].append(len(raw[m]["solution"]))
        for got, lengths in ((row.mean_len_correct, by[True]), (row.mean_len_incorrect, by[False])):
            assert math.isnan(got) if not lengths else got == pytest.approx(np.mean(lengths))


def test_math_cot_reproduces_all_correct_count(shared_data: Path) -> None:
    path = shared_data / "math_cot_100" / "math_cot_100.jsonl"
    table, report = load_math_cot(path)
    assert report.n_kept == 100 and report.n_dropped == 0
    assert ((table["k"] == 8) & (table["n"] == 8)).sum() == 86 and (table["n"] == 8).all()
    assert set(table["difficulty"]) <= {f"level {i}" for i in range(1, 6)}
    raw = _jsonl(path)
    assert list(table["difficulty"]) == [r["level"].lower() for r in raw]
    assert list(table["k"]) == [sum(r["score"]) for r in raw]
    # all-correct prompts have no incorrect length, and the correct length is the plain mean
    full = table["k"] == 8
    assert table.loc[full, "mean_len_incorrect"].isna().all()
    first = raw[int(np.flatnonzero(full)[0])]
    expect = np.mean([len(t) for t in first["response"]])
    assert table.loc[full, "mean_len_correct"].iloc[0] == pytest.approx(expect)


def test_dispatcher_loads_real_files_by_relative_path(shared_data: Path) -> None:
    table, report = load_passrates(
        {
            "kind": "gsm8k_solutions",
            "path": str(shared_data / "gsm8k/example_model_solutions.jsonl"),
        }
    )
    assert len(table) == 1319 and isinstance(report, LoadReport)
    assert "kept 1319" in str(report)


# --------------------------------------------------------------------------- malformed JSON lines


def _write_lines(path: Path, rows: list[object]) -> Path:
    path.write_text("\n".join(r if isinstance(r, str) else json.dumps(r) for r in rows) + "\n")
    return path


def _gsm8k_row(question: str, correct: list[bool]) -> dict:
    row = {"question": question, "ground_truth": "A: 1"}
    for m, c in zip(GSM8K_MODELS, correct, strict=True):
        row[m] = {"is_correct": c, "solution": "x" * (10 if c else 25)}
    return row


def test_gsm8k_malformed_rows_are_dropped_and_counted(tmp_path: Path) -> None:
    good = _gsm8k_row("q1", [True, False, False, True])
    no_model = _gsm8k_row("q2", [True] * 4)
    del no_model["175b_verification"]
    str_flag = _gsm8k_row("q3", [True] * 4)
    str_flag["6b_finetuning"]["is_correct"] = "true"
    path = _write_lines(tmp_path / "s.jsonl", [good, "{not json", "", no_model, str_flag, [1, 2]])
    table, report = load_gsm8k_solutions(path)
    assert (report.n_read, report.n_kept) == (5, 1)
    assert report.dropped == {"invalid_json": 2, "malformed": 2}
    row = table.iloc[0]
    assert (row["n"], row["k"], row["mean_len_correct"], row["mean_len_incorrect"]) == (
        4,
        2,
        10,
        25,
    )


def test_math_cot_malformed_rows_and_levels(tmp_path: Path) -> None:
    rows = [
        {"question": "a", "level": "Level 2", "response": ["ab", "abcd"], "score": [True, False]},
        {"question": "b", "level": "level 5", "response": ["x"], "score": [False]},  # singleton
        {"question": "c", "level": "Level 1", "response": ["x", "y"], "score": [True]},  # mismatch
        {"question": "d", "level": "Level 1", "response": [], "score": []},  # no responses
        {"question": "e", "level": "Level 1", "response": ["x"], "score": [1]},  # not a bool
        {"question": "f", "level": "hard", "response": ["x"], "score": [True]},  # not a MATH level
        {"question": "g", "response": ["x"], "score": [True]},  # no level
    ]
    table, report = load_math_cot(_write_lines(tmp_path / "m.jsonl", rows))
    assert report.n_kept == 2 and report.dropped == {"malformed": 5}
    columns = [m.split("column ")[1].split(":")[0] for m in report.skipped]
    assert columns == ["'score'", "'response'", "'score'", "'level'", "'level'"]
    assert [m.split(": line ")[1].split(":")[0] for m in report.skipped] == [
        "3",
        "4",
        "5",
        "6",
        "7",
    ]
    assert list(table["difficulty"]) == ["level 2", "level 5"]
    assert list(table["n"]) == [2, 1] and list(table["k"]) == [1, 0]
    assert table["mean_len_correct"].iloc[0] == 2 and table["mean_len_incorrect"].iloc[0] == 4
    assert math.isnan(table["mean_len_correct"].iloc[1])


@settings(max_examples=40, deadline=None)
@given(
    st.lists(
        st.lists(st.tuples(st.text(max_size=12), st.booleans()), min_size=1, max_size=6),
        min_size=1,
        max_size=8,
    )
)
def test_math_cot_lengths_match_loop_reference(groups: list[list[tuple[str, bool]]]) -> None:
    rows = [
        {
            "question": f"q{i}",
            "level": "Level 3",
            "response": [t for t, _ in g],
            "score": [s for _, s in g],
        }
        for i, g in enumerate(groups)
    ]
    with tempfile.TemporaryDirectory() as tmp:
        table, _ = load_math_cot(_write_lines(Path(tmp) / "m.jsonl", rows))
    for row, g in zip(table.itertuples(), groups, strict=True):
        assert (row.n, row.k) == (len(g), sum(s for _, s in g))
        for got, want in ((row.mean_len_correct, True), (row.mean_len_incorrect, False)):
            lengths = [len(t) for t, s in g if s == want]
            assert (
                math.isnan(got)
                if not lengths
                else got == pytest.approx(sum(lengths) / len(lengths))
            )


# --------------------------------------------------------------------------- Big-Math fixture

BIGMATH_ROWS = [
    # problem, source, domain, llama8b_solve_rate
    ("p0", "cn_k12", ["Mathematics -> Algebra -> Linear"], 0.5),
    ("p1", "cn_k12", ["Mathematics -> Geometry"], None),  # null
    ("p2", "olympiads", ["Mathematics -> Algebra"], float("nan")),  # NaN
    ("p3", "olympiads", [], -0.1),  # negative
    ("p4", "math", ["Mathematics -> Algebra"], 1.2),  # above 1
    ("p5", "math", ["Mathematics -> Number Theory"], 0.0),
    ("p6", "cn_k12", ["Mathematics -> Geometry", "Mathematics -> Algebra"], 1.0),
    ("p7", "olympiads", ["Mathematics -> Algebraic Geometry"], 1 / 64),
    (None, "math", ["Mathematics -> Algebra"], 0.25),  # no problem text
    ("p0", "math", ["Mathematics -> Calculus"], 0.75),  # repeated problem text
]


def _bigmath_arrow(rows: list[tuple]) -> pa.Table:
    problem, source, domain, rate = zip(*rows, strict=True)
    return pa.table(
        {
            "problem": pa.array(problem, pa.string()),
            "answer": pa.array(["1"] * len(rows), pa.string()),
            "source": pa.array(source, pa.string()),
            "domain": pa.array(domain, pa.list_(pa.string())),
            "llama8b_solve_rate": pa.array(rate, pa.float64()),  # None -> null, nan stays NaN
        }
    )


@pytest.fixture()
def bigmath_file(tmp_path: Path) -> Path:
    path = tmp_path / "bigmath.parquet"
    pq.write_table(_bigmath_arrow(BIGMATH_ROWS), path)
    return path


def test_bigmath_fixture_drop_counts_and_k(bigmath_file: Path) -> None:
    table, report = load_bigmath(bigmath_file)
    assert report.n_read == 10 and report.n_kept == 5
    assert report.dropped == {
        "missing_problem": 1,
        "solve_rate_null": 1,
        "solve_rate_nan": 1,
        "solve_rate_out_of_range": 2,
    }
    assert list(table["k"]) == [32, 0, 64, 1, 48]  # round(64 * [0.5, 0, 1, 1/64, 0.75])
    assert (table["n"] == 64).all() and table["difficulty"].isna().all()
    assert list(table["source"]) == ["cn_k12", "math", "cn_k12", "olympiads", "math"]
    assert table["mean_len_correct"].isna().all()
    ids = list(table["prompt_id"])
    assert ids[-1] == ids[0] + "-1" and len(set(ids)) == 5  # repeated text gets a suffix


def test_bigmath_filters_keep_ids_stable(bigmath_file: Path) -> None:
    full, _ = load_bigmath(bigmath_file)
    id_of = dict(zip(full["prompt_id"], full["k"], strict=True))
    table, report = load_bigmath(bigmath_file, sources=["cn_k12", "olympiads"])
    assert list(table["k"]) == [32, 64, 1] and report.dropped["source_filter"] == 2
    # hierarchy match: "Mathematics -> Algebra" covers "... -> Linear" but not "Algebraic Geometry"
    table, report = load_bigmath(bigmath_file, domains=["Mathematics -> Algebra"])
    assert list(table["k"]) == [32, 64] and report.dropped["domain_filter"] == 3
    table, report = load_bigmath(bigmath_file, solve_rate_band=(0.4, 0.75))
    assert list(table["k"]) == [32, 48] and report.dropped["solve_rate_band"] == 3
    assert all(id_of[i] == k for i, k in zip(table["prompt_id"], table["k"], strict=True))
    table, report = load_bigmath(
        bigmath_file, sources=["math"], domains=["Mathematics -> Calculus"], solve_rate_band=[0, 1]
    )
    assert list(table["k"]) == [48] and report.n_kept + report.n_dropped == report.n_read


def test_bigmath_directory_and_dispatcher(tmp_path: Path, bigmath_file: Path) -> None:
    folder = tmp_path / "snapshot" / "data"
    folder.mkdir(parents=True)
    arrow = _bigmath_arrow(BIGMATH_ROWS)
    pq.write_table(arrow.slice(0, 4), folder / "train-00000.parquet")
    pq.write_table(arrow.slice(4), folder / "train-00001.parquet")
    from_dir, report = load_bigmath(tmp_path / "snapshot")
    from_file, _ = load_bigmath(bigmath_file)
    pd.testing.assert_frame_equal(from_dir, from_file)
    via_spec, _ = load_passrates(
        {"kind": "bigmath", "path": str(bigmath_file), "sources": ["math"]}
    )
    assert list(via_spec["k"]) == [0, 48]


def test_bigmath_bad_inputs(tmp_path: Path, bigmath_file: Path) -> None:
    with pytest.raises(ValueError, match="bigmath data not found") as info:
        load_bigmath(tmp_path / "nowhere.parquet")
    assert "nowhere.parquet" in _one_line_error(info)
    with pytest.raises(ValueError, match="not found: data/missing/bigmath.parquet$"):
        load_bigmath("data/missing/bigmath.parquet")  # a relative path, not owner/name
    with pytest.raises(ValueError, match="exactly one of 'path'"):
        load_bigmath(bigmath_file, hub="open-r1/x")
    with pytest.raises(ValueError, match="solve_rate_band"):
        load_bigmath(bigmath_file, solve_rate_band=(0.8, 0.2))
    pq.write_table(
        _bigmath_arrow(BIGMATH_ROWS).drop_columns(["llama8b_solve_rate"]), tmp_path / "x.parquet"
    )
    with pytest.raises(ValueError, match="llama8b_solve_rate"):
        load_bigmath(tmp_path / "x.parquet")


# --------------------------------------------------------------------------- dispatcher errors


@pytest.mark.parametrize(
    ("spec", "pattern"),
    [
        ({"kind": "bigmeth"}, "unknown pass-rate kind 'bigmeth'; valid: bigmath, gsm8k_solutions"),
        ({"path": "x"}, "needs a 'kind'"),
        ({"kind": "math_cot"}, "kind 'math_cot' needs 'path'"),
        ({"kind": "math_cot", "path": "no/such.jsonl"}, "file not found: no/such.jsonl"),
        ({"kind": "gsm8k_solutions", "path": "x", "seed": 1}, "unknown key.* seed .*valid: path"),
        ({"kind": "synthetic", "n_prompts": 0}, "n_prompts and n must be >= 1"),
        ({"kind": "bigmath", "path": "a", "source": "b"}, "unknown key.* source"),
        ({"kind": "bigmath", "path": "a.parquet", "hub": "o/n"}, "exactly one of 'path'"),
        ({"kind": "math_cot", "hub": "o/n"}, "unknown key.* hub .*only bigmath reads the hub"),
        ({"kind": "bigmath", "hub": "not a hub id"}, "hub must be a hub id owner/name"),
    ],
)
def test_bad_specs_name_the_problem(spec: dict, pattern: str) -> None:
    with pytest.raises(ValueError, match=pattern) as info:
        load_passrates(spec)
    _one_line_error(info)


@pytest.fixture
def hub_calls(monkeypatch) -> list:
    """datasets.load_dataset replaced by a recorder returning Big-Math-schema rows (no network)."""
    import datasets

    calls = []

    def load_dataset(*args, **kwargs):
        calls.append((args, kwargs))
        return datasets.Dataset.from_list(
            [{"problem": "p", "source": "math", "llama8b_solve_rate": 0.5}]
        )

    monkeypatch.setattr(datasets, "load_dataset", load_dataset)
    return calls


def test_the_hub_is_read_only_when_named(hub_calls: list, tmp_path: Path) -> None:
    table, _ = load_passrates({"kind": "bigmath", "hub": "open-r1/Big-Math-RL-Verified-Processed"})
    assert list(table["k"]) == [32]
    assert hub_calls == [(("open-r1/Big-Math-RL-Verified-Processed",), {"split": "train"})]
    for spec in (
        {"kind": "bigmath", "path": "open-r1/Big-Math-RL-Verified-Processed"},
        {"kind": "gsm8k_solutions", "path": "openai/gsm8k"},
        {"kind": "bigmath", "path": "data/nothere.parquet"},  # a typo'd path
    ):
        with pytest.raises(ValueError, match=f"not found: {spec['path']}") as info:
            load_passrates(spec)
        text = _one_line_error(info)
        assert ("write hub:" in text) is (not spec["path"].endswith(".parquet")), text
    assert len(hub_calls) == 1  # a missing local path never reached load_dataset

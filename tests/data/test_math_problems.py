"""Tests for grpo_dial.data.math_problems: specs and mixes over the adapters, on ../shared/data
and on fixtures with real schemas.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math

import datasets
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from grpo_dial.data.math_problems import MATH_COLUMNS, check_spec, load_mix, load_source


def sha_id(prefix: str, text: str) -> str:
    return f"{prefix}-" + hashlib.sha1(text.encode()).hexdigest()[:16]


def write_jsonl(path, rows, extra_lines=()):
    lines = [json.dumps(r) for r in rows] + list(extra_lines)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


GSM_ROWS = [
    {"question": "Tom has 3 apples and buys 4. How many?", "answer": "3 + 4 = <<3+4=7>>7\n#### 7"},
    {"question": "A car costs 1,234 dollars. Price?", "answer": "It is 1,234.\n#### 1,234"},
    {"question": "No final answer here.", "answer": "Just words, no marker."},
    {"question": "Answer is null.", "answer": None},
    {"question": "", "answer": "#### 5"},
    {"question": "Tom has 3 apples and buys 4. How many?", "answer": "#### 7"},  # repeat
    {"question": "Empty after marker.", "answer": "work\n####   "},
]


@pytest.fixture
def gsm_file(tmp_path):
    return write_jsonl(tmp_path / "gsm.jsonl", GSM_ROWS, extra_lines=["{not json"])


# ----------------------------------------------------------------------------- GSM8K


def test_gsm8k_fixture_drops_and_counts(gsm_file, caplog):
    with caplog.at_level(logging.INFO, logger="grpo_dial"):
        table, report = load_source({"dataset": "gsm8k", "path": str(gsm_file)})
    assert list(table.columns) == list(MATH_COLUMNS)
    assert table["problem"].tolist() == [GSM_ROWS[0]["question"], GSM_ROWS[1]["question"]]
    assert table["reference"].tolist() == ["7", "1234"]  # commas removed
    assert table["solution"].tolist() == ["3 + 4 = 7", "It is 1,234."]  # calculator notes gone
    assert table["prompt_id"].tolist() == [sha_id("gsm8k", r["question"]) for r in GSM_ROWS[:2]]
    assert set(table["difficulty"]) == {"gsm8k"} and set(table["source"]) == {"gsm8k"}
    assert table["prior_pass_rate"].isna().all()
    assert report.n_read == 8 and report.n_kept == 2
    assert report.dropped == {
        "invalid_json": 1,
        "missing_problem": 1,
        "missing_answer": 3,
        "duplicate_problem": 1,
    }
    assert f"dropped 3 of 8 rows of gsm8k:{gsm_file}: missing answer" in caplog.text


def test_gsm8k_shared_data(shared_data):
    test, report = load_source(
        {"dataset": "gsm8k", "path": str(shared_data / "gsm8k"), "split": "test"}
    )
    assert len(test) == 1319 and report.n_dropped == 0
    first = test.iloc[0]
    assert first["problem"].startswith("Janet\u2019s ducks lay 16 eggs")
    assert first["reference"] == "18"
    assert "<<" not in first["solution"] and first["solution"].endswith("market.")
    assert test["reference"].str.fullmatch(r"-?[0-9]+(\.[0-9]+)?").all()
    assert test["prompt_id"].is_unique and test["prompt_id"].str.startswith("gsm8k-").all()
    train, _ = load_source({"dataset": "gsm8k", "path": str(shared_data / "gsm8k/train.jsonl")})
    assert len(train) == 7473


# ----------------------------------------------------------------------------- MATH-500


def test_math500_shared_data_levels(shared_data):
    path = str(shared_data / "math500/test.jsonl")
    full, report = load_source({"dataset": "math500", "path": path})
    assert len(full) == 500 and report.n_dropped == 0
    counts = full["difficulty"].value_counts().to_dict()
    assert counts == {"level1": 43, "level2": 90, "level3": 105, "level4": 128, "level5": 134}
    assert full["solution"].notna().all() and full["solution"].str.contains("boxed").all()
    easy, report = load_source({"dataset": "math500", "path": path, "levels": [1, 2]})
    assert len(easy) == 133 and report.dropped == {"filtered_out": 367}
    assert set(easy["difficulty"]) == {"level1", "level2"}
    assert set(easy["prompt_id"]) <= set(full["prompt_id"])
    algebra, _ = load_source(
        {"dataset": "math500", "path": path, "levels": 1, "subjects": ["Algebra"]}
    )
    assert 0 < len(algebra) < 43


def test_math500_formats_agree(tmp_path):
    rows = [
        {"problem": "What is $1+1$?", "answer": "2", "level": 1, "subject": "Algebra",
         "solution": "$1+1=\\boxed{2}$", "unique_id": "test/algebra/1.json"},
        {"problem": "Half of 1?", "answer": "\\frac{1}{2}", "level": "Level 3",
         "subject": "Algebra", "solution": "It is $\\boxed{\\frac12}$.", "unique_id": "x"},
        {"problem": "Blank answer?", "answer": " ", "level": 2, "subject": "Algebra",
         "solution": "", "unique_id": "y"},
    ]  # fmt: skip
    write_jsonl(tmp_path / "test.jsonl", rows)
    (tmp_path / "arr").mkdir()
    (tmp_path / "arr" / "m.json").write_text(json.dumps(rows))
    pd.DataFrame(rows).astype({"level": str}).to_parquet(tmp_path / "m.parquet")
    tables = []
    for path in (tmp_path, tmp_path / "arr" / "m.json", tmp_path / "m.parquet"):
        table, report = load_source({"dataset": "math500", "path": str(path)})
        assert report.dropped == {"missing_answer": 1}
        tables.append(table)
    for t in tables[1:]:
        pd.testing.assert_frame_equal(t, tables[0])
    assert tables[0]["difficulty"].tolist() == ["level1", "level3"]
    assert tables[0]["reference"].tolist() == ["2", "\\frac{1}{2}"]


# ----------------------------------------------------------------------------- Big-Math


def bigmath_parquet(path):
    """Rows with exactly Big-Math's schema, nulls included (rate, answer, problem)."""
    rows = {
        "problem": ["p0", "p1", "p2", "p3", "p4", None, "p6", "p7", "p8", "p9"],
        "answer": ["1", "2", "3", None, "5", "6", "7", "", "9", "10"],
        "source": ["olympiads", "cn_k12", "olympiads", "math", "cn_k12", "math", "olympiads",
                   "math", "orca_math", "olympiads"],
        "domain": [["Mathematics -> Algebra -> Linear"], ["Mathematics -> Geometry"],
                   ["Mathematics -> Algebra"], ["Mathematics -> Algebra"], None,
                   ["Mathematics -> Algebra"], ["Mathematics -> Number Theory"],
                   ["Mathematics -> Algebra"], ["Mathematics -> Algebra -> Other"],
                   ["Mathematics -> Geometry", "Mathematics -> Algebra"]],
        "llama8b_solve_rate": [0.0, 0.2, None, 0.5, 0.65, 0.1, 1.0, 0.3, 0.8, float("nan")],
    }  # fmt: skip
    schema = pa.schema(
        [
            ("problem", pa.string()),
            ("answer", pa.string()),
            ("source", pa.string()),
            ("domain", pa.list_(pa.string())),
            ("llama8b_solve_rate", pa.float64()),
        ]
    )
    pq.write_table(pa.table(rows, schema=schema), path)
    return path


def test_bigmath_fixture_all_rows(tmp_path):
    path = bigmath_parquet(tmp_path / "bm.parquet")
    table, report = load_source({"dataset": "bigmath", "path": str(path)})
    assert report.n_read == 10
    assert report.dropped == {"missing_problem": 1, "missing_answer": 2}
    assert table["problem"].tolist() == ["p0", "p1", "p2", "p4", "p6", "p8", "p9"]
    assert table["source"].tolist() == [
        "olympiads", "cn_k12", "olympiads", "cn_k12", "olympiads", "orca_math", "olympiads",
    ]  # fmt: skip
    assert table["difficulty"].tolist() == [
        "sr0.0-0.2", "sr0.2-0.4", "unknown", "sr0.6-0.8", "sr0.8-1.0", "sr0.8-1.0", "unknown",
    ]  # fmt: skip
    rate = table["prior_pass_rate"].to_numpy()
    np.testing.assert_array_equal(rate[[0, 1, 3, 4, 5]], [0.0, 0.2, 0.65, 1.0, 0.8])
    assert np.isnan(rate[[2, 6]]).all()
    assert table["prompt_id"].tolist() == [sha_id("bigmath", p) for p in table["problem"]]
    assert table["solution"].isna().all()


def test_bigmath_filters(tmp_path):
    path = str(bigmath_parquet(tmp_path / "bm.parquet"))
    spec = {"dataset": "bigmath", "path": path, "solve_rate": [0.2, 0.8]}
    table, report = load_source(spec)
    assert table["problem"].tolist() == ["p1", "p4", "p8"]  # null and NaN rates dropped
    assert report.dropped["filtered_out"] == 4
    table, _ = load_source({**spec, "sources": ["cn_k12", "orca_math"]})
    assert table["problem"].tolist() == ["p1", "p4", "p8"]
    table, _ = load_source({**spec, "sources": ["cn_k12"], "domains": ["Mathematics -> Algebra"]})
    assert table.empty and list(table.columns) == list(MATH_COLUMNS)
    table, _ = load_source(
        {"dataset": "bigmath", "path": path, "domains": ["Mathematics -> Algebra"]}
    )
    assert table["problem"].tolist() == ["p0", "p2", "p8", "p9"]  # below it in the hierarchy too
    table, _ = load_source({"dataset": "bigmath", "path": path, "solve_rate": [1.0, 1.0]})
    assert table["problem"].tolist() == ["p6"]


# ----------------------------------------------------------------------------- mixes


def test_mix_subsample_is_seeded_and_deduplicated(tmp_path, gsm_file, caplog):
    rows = [{"question": f"What is {i} + {i}?", "answer": f"#### {2 * i}"} for i in range(50)]
    many = write_jsonl(tmp_path / "many.jsonl", rows)
    spec = {"dataset": "gsm8k", "path": str(many), "n": 10, "seed": 1}
    a, reports = load_mix([spec, {"dataset": "gsm8k", "path": str(gsm_file)}])
    b, _ = load_mix([spec, {"dataset": "gsm8k", "path": str(gsm_file)}])
    c, _ = load_mix([{**spec, "seed": 2}])
    pd.testing.assert_frame_equal(a, b)
    assert len(a) == 12 and a["prompt_id"].is_unique
    assert set(a["prompt_id"][:10]) != set(c["prompt_id"])
    assert reports[0].dropped == {"subsample": 40} and reports[0].n_kept == 10
    twice, reports = load_mix([{"dataset": "gsm8k", "path": str(gsm_file)}] * 2)
    assert len(twice) == 2 and reports[1].n_kept == 0
    assert reports[1].dropped["duplicate_problem"] == 3  # 1 within the file, 2 seen before
    with caplog.at_level(logging.WARNING, logger="grpo_dial"):
        big, _ = load_mix([{"dataset": "gsm8k", "path": str(many), "n": 80}])
    assert len(big) == 50 and "only 50 available" in caplog.text


# ----------------------------------------------------------------------------- errors


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ({"dataset": "aime", "path": "x"}, "dataset must be one of gsm8k, math500, bigmath"),
        ({"dataset": "gsm8k", "path": "x.jsonl", "levels": [1]}, "unknown key(s) levels"),
        ({"dataset": "math500", "path": "x", "solve_rate": [0, 1]}, "unknown key(s) solve_rate"),
        ({"dataset": "gsm8k", "path": "nowhere/missing.jsonl"}, "gsm8k data not found"),
        ({"dataset": "bigmath", "path": "nowhere/missing.parquet"}, "bigmath data not found"),
        ({"dataset": "gsm8k", "path": "x", "n": 0}, "n must be an integer >= 1"),
        ({"dataset": "gsm8k", "path": ""}, "path must be a non-empty string"),
        ("gsm8k", "must be a mapping"),
    ],
)
def test_bad_specs_raise_one_line(spec, message):
    with pytest.raises(ValueError, match=None) as err:
        load_source(spec)
    assert message in str(err.value) and "\n" not in str(err.value)


def test_bad_filter_values(tmp_path, shared_data):
    path = str(shared_data / "math500/test.jsonl")
    with pytest.raises(ValueError, match="levels must be a non-empty list of integers in 1..5"):
        load_source({"dataset": "math500", "path": path, "levels": [0, 6]})
    bm = str(bigmath_parquet(tmp_path / "bm.parquet"))
    with pytest.raises(ValueError, match=r"solve_rate must be \[lo, hi\]"):
        load_source({"dataset": "bigmath", "path": bm, "solve_rate": [0.8, 0.2]})
    bad = write_jsonl(tmp_path / "bad.jsonl", [{"q": "x", "a": "y"}])
    with pytest.raises(ValueError, match="gsm8k data lacks column"):
        load_source({"dataset": "gsm8k", "path": str(bad)})
    with pytest.raises(ValueError, match="non-empty list of source specs"):
        load_mix([])


def test_spec_defaults_and_no_implicit_hub():
    assert check_spec({"dataset": "gsm8k", "hub": "openai/gsm8k"}) == {
        "dataset": "gsm8k", "hub": "openai/gsm8k", "split": "train", "n": None, "seed": 0,
    }  # fmt: skip
    assert check_spec({"dataset": "math500", "path": "x.jsonl"})["split"] == "test"
    for spec in ({"dataset": "gsm8k"}, {"dataset": "gsm8k", "path": "a", "hub": "o/n"}):
        with pytest.raises(ValueError, match="exactly one of 'path'.* and 'hub'"):
            check_spec(spec)  # no default hub id: a spec names where its data is
    with pytest.raises(ValueError, match="hub must be a hub id owner/name"):
        check_spec({"dataset": "gsm8k", "hub": "data/x/y.jsonl"})


# ----------------------------------------------------------------------------- hub ids


@pytest.fixture
def fake_hub(monkeypatch):
    """datasets.load_dataset replaced by a recorder returning a real in-memory Dataset."""
    calls = []
    rows = {
        "openai/gsm8k": [{"question": "1+1?", "answer": "so\n#### 2"}],
        "HuggingFaceH4/MATH-500": [
            {
                "problem": "2+2?",
                "answer": "4",
                "level": 1,
                "subject": "Algebra",
                "solution": "\\boxed{4}",
                "unique_id": "a",
            },
        ],  # fmt: skip
        "SynthLabsAI/Big-Math-RL-Verified": [
            {
                "problem": "3+3?",
                "answer": "6",
                "source": "math",
                "domain": ["Algebra"],
                "llama8b_solve_rate": None,
            },
        ],  # fmt: skip
    }

    def load_dataset(*args, **kwargs):
        calls.append((args, kwargs))
        return datasets.Dataset.from_list(rows[args[0]])

    monkeypatch.setattr(datasets, "load_dataset", load_dataset)
    return calls


def test_explicit_hub_ids_route_to_load_dataset(fake_hub):
    table, _ = load_source({"dataset": "gsm8k", "hub": "openai/gsm8k", "split": "test"})
    assert table["reference"].tolist() == ["2"]
    table, _ = load_source({"dataset": "math500", "hub": "HuggingFaceH4/MATH-500"})
    assert table["difficulty"].tolist() == ["level1"]
    table, _ = load_source({"dataset": "bigmath", "hub": "SynthLabsAI/Big-Math-RL-Verified"})
    assert table["difficulty"].tolist() == ["unknown"] and math.isnan(table["prior_pass_rate"][0])
    assert fake_hub == [
        (("openai/gsm8k", "main"), {"split": "test"}),
        (("HuggingFaceH4/MATH-500",), {"split": "test"}),
        (("SynthLabsAI/Big-Math-RL-Verified",), {"split": "train"}),
    ]


def test_hub_failures_are_one_line(monkeypatch):
    def offline(*args, **kwargs):
        raise ConnectionError("no network here\nlong traceback text")

    monkeypatch.setattr(datasets, "load_dataset", offline)
    for dataset, hub in (("gsm8k", "openai/gsm8k"), ("bigmath", "open-r1/x")):
        with pytest.raises(ValueError) as err:
            load_source({"dataset": dataset, "hub": hub})
        assert f"{hub!r}: ConnectionError: no network here" in str(err.value)
        assert "\n" not in str(err.value)
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")  # honoured: the libraries read their cache
    with pytest.raises(ValueError, match="HF_DATASETS_OFFLINE is set: only the local"):
        load_source({"dataset": "gsm8k", "hub": "openai/gsm8k"})


@pytest.mark.parametrize("dataset", ["gsm8k", "math500", "bigmath"])
def test_a_missing_path_shaped_like_a_hub_id_is_never_downloaded(fake_hub, dataset):
    with pytest.raises(ValueError) as err:
        load_source({"dataset": dataset, "path": "openai/gsm8k"})
    text = str(err.value)
    assert "not found: openai/gsm8k" in text and "write hub: openai/gsm8k" in text, text
    assert "\n" not in text and fake_hub == []  # load_dataset was never called

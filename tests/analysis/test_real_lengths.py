"""Real logged responses: loaders against the raw JSON read a second way, group means against a
direct pandas computation, the stratified problem bootstrap against a slow loop, bad input."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from grpo_dial.analysis import real_lengths as rl
from grpo_dial.data.gsm8k import GSM8K_MODELS

MATH_COT = Path("math_cot_100/math_cot_100.jsonl")
GSM8K = Path("gsm8k/example_model_solutions.jsonl")


def _raw(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


# --------------------------------------------------------------------------- real files


def test_math_cot_real(shared_data: Path) -> None:
    raw = _raw(shared_data / MATH_COT)
    got = rl.load_math_cot_responses(shared_data / MATH_COT)
    df = got.responses
    assert (len(df), got.n_problems, got.n_skipped) == (800, 100, 0)
    assert list(df.columns) == list(rl.RESPONSE_COLUMNS)
    assert df["correct"].sum() == sum(sum(r["score"]) for r in raw) == 728
    assert df["length_chars"].sum() == sum(len(t) for r in raw for t in r["response"])
    per_level = df.drop_duplicates("problem_id")["difficulty"].value_counts().to_dict()
    assert per_level == {f"level {k[-1]}": v for k, v in Counter(r["level"] for r in raw).items()}
    assert set(df["model"]) == {"qwen2.5-math"} and df["problem_id"].nunique() == 100


def test_gsm8k_real(shared_data: Path) -> None:
    raw = _raw(shared_data / GSM8K)
    got = rl.load_gsm8k_responses(shared_data / GSM8K)
    df = got.responses
    assert (len(df), got.n_problems, got.n_skipped) == (5276, 1319, 0)
    n_correct = sum(r[m]["is_correct"] for r in raw for m in GSM8K_MODELS)
    assert df["correct"].sum() == n_correct == 2001
    k_counts = df.drop_duplicates("problem_id")["difficulty"].value_counts().to_dict()
    assert k_counts == {"k=0": 432, "k=1": 290, "k=2": 236, "k=3": 205, "k=4": 156}
    # the k label agrees with the correct count of its problem's 4 rows
    k_rows = df.groupby("problem_id")["correct"].sum()
    labels = df.groupby("problem_id")["difficulty"].first().str.removeprefix("k=").astype(int)
    assert (k_rows == labels).all()
    for m in GSM8K_MODELS:
        rows = df[df["model"] == m]
        assert rows["length_chars"].tolist() == [len(r[m]["solution"]) for r in raw]


def test_group_means_match_pandas(shared_data: Path) -> None:
    df = pd.concat(
        [
            rl.load_math_cot_responses(shared_data / MATH_COT).responses,
            rl.load_gsm8k_responses(shared_data / GSM8K).responses,
        ]
    )
    table = rl.length_by_correctness(df, n_boot=200).set_index(["source", "difficulty"])
    assert list(table.columns) == rl.LBC_COLUMNS
    direct = df.groupby(["source", "difficulty", "correct"])["length_chars"].mean().unstack()
    np.testing.assert_allclose(table["mean_len_correct"], direct[True].reindex(table.index))
    np.testing.assert_allclose(table["mean_len_incorrect"], direct[False].reindex(table.index))
    counts = df.groupby(["source", "difficulty"])["correct"].agg(["sum", "size"])
    assert (table["n_correct"] == counts["sum"]).all()
    assert (table["n_incorrect"] == counts["size"] - counts["sum"]).all()
    # k=0 has no correct response, k=4 no incorrect one: no ratio, no interval, no crash
    assert table.loc[("gsm8k", "k=0"), ["ratio", "diff_lo"]].isna().all()
    assert table.loc[("gsm8k", "k=4"), ["ratio", "diff_hi"]].isna().all()
    # MATH level 1: all incorrect responses come from one problem -> interval withheld
    assert table.loc[("math_cot_100", "level 1"), "n_problems_incorrect"] == 1
    assert np.isnan(table.loc[("math_cot_100", "level 1"), "diff_lo"])
    ok = table.dropna(subset=["diff_lo"])
    assert len(ok) >= 4 and ((ok["diff_lo"] <= ok["diff"]) & (ok["diff"] <= ok["diff_hi"])).all()
    assert np.allclose(ok["ratio"], ok["mean_len_incorrect"] / ok["mean_len_correct"])


# --------------------------------------------------------------------------- bootstrap


def _toy(seed: int = 0) -> pd.DataFrame:
    """Two groups: 'a' 6 problems x 3 responses, 'b' 4 problems x 2 (incl. an all-correct and
    an all-wrong problem); problem ids deliberately unsorted."""
    rng = np.random.default_rng(seed)
    rows = []
    for grp, n_prob, g in (("b", 4, 2), ("a", 6, 3)):
        for p in rng.permutation(n_prob):
            for _ in range(g):
                c = bool(rng.random() < 0.5) if p > 1 else p == 0
                rows.append(
                    {
                        "source": "toy",
                        "problem_id": f"{grp}{p}",
                        "difficulty": grp,
                        "model": "m",
                        "correct": c,
                        "length_chars": int(rng.integers(10, 200)) + (0 if c else 40),
                    }
                )
    return pd.DataFrame(rows)


def test_bootstrap_matches_slow_loop() -> None:
    df = _toy()
    n_boot, seed, level = 40, 7, 0.8
    table = rl.length_by_correctness(df, n_boot=n_boot, seed=seed, level=level)
    # the same draws: clusters sorted by (group, problem_id), groups sorted
    problems = [sorted(df.loc[df["difficulty"] == g, "problem_id"].unique()) for g in ("a", "b")]
    group_of = np.repeat([0, 1], [len(p) for p in problems])
    counts = rl._stratified_counts(group_of, n_boot, seed)  # (B, K)
    assert (counts[:, group_of == 0].sum(1) == 6).all() and (
        counts[:, group_of == 1].sum(1) == 4
    ).all()
    flat = [p for ps in problems for p in ps]
    for g in ("a", "b"):
        diffs = []
        for b in range(n_boot):
            drawn = [p for p, c in zip(flat, counts[b], strict=True) for _ in range(int(c))]
            rs = pd.concat([df[df["problem_id"] == p] for p in drawn if p[0] == g])
            lc = rs.loc[rs["correct"], "length_chars"].mean()
            lw = rs.loc[~rs["correct"], "length_chars"].mean()
            diffs.append(lw - lc)
        want = np.nanpercentile(diffs, [10, 90])
        row = table[table["difficulty"] == g].iloc[0]
        assert np.isfinite(want).all()
        np.testing.assert_allclose([row["diff_lo"], row["diff_hi"]], want, rtol=1e-12)


def test_singleton_and_one_class_groups() -> None:
    df = pd.DataFrame(
        {
            "source": "s",
            "problem_id": ["p0", "p1", "p1", "p2", "p2"],
            "difficulty": ["one", "mixed", "mixed", "allright", "allright"],
            "model": "m",
            "correct": [True, True, False, True, True],
            "length_chars": [5, 10, 30, 7, 9],
        }
    )
    t = rl.length_by_correctness(df, n_boot=20).set_index("difficulty")
    assert t.loc["mixed", "ratio"] == 3 and t.loc["mixed", "diff"] == 20
    assert np.isnan(t.loc["mixed", "diff_lo"])  # one problem per class: no interval
    assert t.loc["allright", "mean_len_correct"] == 8 and np.isnan(t.loc["allright", "ratio"])
    assert t.loc["one", "n_problems"] == 1 and t.loc["one", "n_incorrect"] == 0


# --------------------------------------------------------------------------- tokens, bad input


class SplitTokenizer:
    """encode without the HF keyword: exercises the plain-encode path."""

    def encode(self, text: str) -> list[int]:
        return [hash(w) % 97 for w in text.split()]


def call_tokenizer(text: str, add_special_tokens: bool = True) -> dict[str, list[int]]:
    """A callable returning a mapping, like an HF tokenizer's BatchEncoding."""
    return {"input_ids": [1] * len(text) + ([0] if add_special_tokens else [])}


def _write(tmp_path: Path, name: str, lines: list[str]) -> Path:
    path = tmp_path / name
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _math_row(level: object = "Level 2", texts: object = None, score: object = None) -> str:
    texts = ["a b c", "d e"] if texts is None else texts
    score = [True, False] if score is None else score
    return json.dumps(
        {"question": "q", "answer": "1", "level": level, "response": texts, "score": score}
    )


def test_math_cot_malformed_and_tokens(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        "m.jsonl",
        [
            _math_row(),
            "{not json",
            json.dumps({"level": "Level 1", "response": ["x"]}),  # no score
            _math_row(score=[True]),  # lengths differ
            _math_row(level="Level 9"),
            _math_row(score=[1, 0]),  # ints, not bools
            "",
            _math_row(level="Level 5", texts=["one two three four", "x"]),
        ],
    )
    got = rl.load_math_cot_responses(path, tokenizer=SplitTokenizer())
    assert (got.n_problems, got.n_skipped) == (2, 5)
    lines = [s.removeprefix(f"{path}: ").split(":")[0] for s in got.skipped]
    assert lines == [f"line {i}" for i in (2, 3, 4, 5, 6)]
    df = got.responses
    assert df["length_tokens"].tolist() == [3, 2, 4, 1]
    assert df["length_chars"].tolist() == [5, 3, 18, 1]
    assert df["difficulty"].tolist() == ["level 2"] * 2 + ["level 5"] * 2
    assert df["problem_id"].nunique() == 2
    table = rl.length_by_correctness(df, n_boot=10)
    assert list(table.columns) == ["source", "difficulty", *rl.LBC_COLUMNS, *rl.LBC_TOKEN_COLUMNS]
    assert table["mean_tokens_correct"].tolist() == [3, 4]


def test_gsm8k_malformed_and_callable_tokenizer(tmp_path: Path) -> None:
    def sol(ok: object, text: object = "ab") -> dict:
        return {"is_correct": ok, "solution": text}

    good = {m: sol(i % 2 == 0, "x" * (i + 1)) for i, m in enumerate(GSM8K_MODELS)}
    path = _write(
        tmp_path,
        "g.jsonl",
        [
            json.dumps({"question": "q", **good}),
            json.dumps({"question": "q", **{**good, "6b_finetuning": sol("yes")}}),
            json.dumps(
                {"question": "q", **{k: v for k, v in good.items() if k != "175b_finetuning"}}
            ),
            json.dumps({"question": "q", **{**good, "6b_verification": sol(True, None)}}),
        ],
    )
    got = rl.load_gsm8k_responses(path, tokenizer=call_tokenizer)
    assert (got.n_problems, got.n_skipped) == (1, 3)
    assert got.responses["length_tokens"].tolist() == [1, 2, 3, 4]  # no special token added
    assert got.responses["difficulty"].unique().tolist() == ["k=2"]
    assert got.responses["model"].tolist() == list(GSM8K_MODELS)


def test_errors(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="not found: .*nope.jsonl"):
        rl.load_gsm8k_responses(tmp_path / "nope.jsonl")
    with pytest.raises(ValueError, match="tokenizer"):
        rl.load_math_cot_responses(_write(tmp_path, "m.jsonl", [_math_row()]), tokenizer=3)
    df = _toy()
    with pytest.raises(ValueError, match="lacks column"):
        rl.length_by_correctness(df, by=("band",))
    with pytest.raises(ValueError, match="at least one"):
        rl.length_by_correctness(df, by=())

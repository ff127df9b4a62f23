"""Length-by-correctness split: hand-computed numbers, exactness and attribution properties,
the empty-class convention, and the vectorized prompt bootstrap against a slow loop."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from grpo_dial.analysis.training import decompose as d

SPLIT = ["mix", "within_correct", "within_incorrect"]


def frame(rows: list[tuple]) -> pd.DataFrame:
    """rows of (step, prompt_id, reward, length[, work]) -> a full responses table."""
    out = []
    for r in rows:
        step, pid, reward, length = r[:4]
        work = r[4] if len(r) > 4 else math.floor(length / 2)
        out.append(
            {
                "step": step,
                "group": 0,
                "prompt_id": pid,
                "difficulty": "hard" if pid.endswith("h") else "easy",
                "k": 0,
                "G": 1,
                "reward": float(reward),
                "length": float(length),
                "tokens": float(length) / 4,
                "truncated": False,
                "advantage": 0.0,
                "work": float(work),
                "redundant": float(length - work),
                "resample_round": 0,
                "trained": True,
            }
        )
    return pd.DataFrame(out)


# window 0: a0 = 1/3, Lc0 = 10, Lw0 = 25; window 1: a1 = 3/4, Lc1 = 12, Lw1 = 40.
HAND = frame(
    [
        (0, "A", 1, 10),
        (0, "A", 0, 20),
        (0, "B", 0, 30),
        (1, "A", 1, 12),
        (1, "A", 1, 14),
        (1, "B", 0, 40),
        (1, "B", 1, 10),
    ]
)


def test_hand_computed() -> None:
    s = d.decompose(HAND, [0], [1])
    assert s["a0"] == pytest.approx(1 / 3) and s["a1"] == pytest.approx(0.75)
    assert (s["Lc0"], s["Lw0"], s["Lc1"], s["Lw1"]) == pytest.approx((10, 25, 12, 40))
    assert s["total"] == pytest.approx(19 - 20)
    a_bar = (1 / 3 + 0.75) / 2
    assert s["mix"] == pytest.approx((0.75 - 1 / 3) * (11 - 32.5))
    assert s["within_correct"] == pytest.approx(a_bar * 2)
    assert s["within_incorrect"] == pytest.approx((1 - a_bar) * 15)
    assert (s["n0"], s["n1"], s["n_prompts"]) == (3, 4, 2)


# window 0: correct (10: W 4 R 6), wrong (20: W 5 R 15), (30: W 12 R 18);
# window 1: correct (12: W 5 R 7), (14: W 10 R 4), (10: W 6 R 4), wrong (40: W 30 R 10).
# Wc 4 -> 7, Rc 6 -> 5, Ww 8.5 -> 30, Rw 16.5 -> 10: work and redundant move differently in each
# class, so a swap of the two within either class changes the terms.
SPLIT_HAND = frame(
    [
        (0, "A", 1, 10, 4),
        (0, "A", 0, 20, 5),
        (0, "B", 0, 30, 12),
        (1, "A", 1, 12, 5),
        (1, "A", 1, 14, 10),
        (1, "B", 0, 40, 30),
        (1, "B", 1, 10, 6),
    ]
)


def test_hand_computed_work_and_redundant_terms() -> None:
    s = d.decompose(SPLIT_HAND, [0], [1])
    a_bar = (1 / 3 + 3 / 4) / 2  # 13/24
    want = {"Wc0": 4, "Wc1": 7, "Rc0": 6, "Rc1": 5, "Ww0": 8.5, "Ww1": 30, "Rw0": 16.5, "Rw1": 10}
    for key, value in want.items():
        assert s[key] == pytest.approx(value, rel=1e-12), key
    assert s["within_correct_work"] == pytest.approx(a_bar * 3, rel=1e-12)
    assert s["within_correct_redundant"] == pytest.approx(a_bar * -1, rel=1e-12)
    assert s["within_incorrect_work"] == pytest.approx((1 - a_bar) * 21.5, rel=1e-12)
    assert s["within_incorrect_redundant"] == pytest.approx((1 - a_bar) * -6.5, rel=1e-12)
    assert s["within_correct"] == pytest.approx(a_bar * 2, rel=1e-12)
    assert s["within_incorrect"] == pytest.approx((1 - a_bar) * 15, rel=1e-12)


def test_length_curves_hand_numbers_every_class_column() -> None:
    curves = d.length_curves(SPLIT_HAND).set_index(["step", "band"])
    want = {
        0: (1 / 3, 20, 10, 25, 4, 6, 8.5, 16.5, 3),
        1: (3 / 4, 19, 12, 40, 7, 5, 30, 10, 4),
    }
    for step, values in want.items():
        for band in ("all", "easy"):  # prompts A and B are both "easy"
            row = curves.loc[(step, band)]
            for col, value in zip(d.CURVE_COLUMNS[2:], values, strict=True):
                assert row[col] == pytest.approx(value, rel=1e-12), (step, band, col)


# --------------------------------------------------------------------------- property tests


@st.composite
def runs(draw: st.DrawFn, min_prompts: int = 1) -> pd.DataFrame:
    """Random runs over 2-6 steps with singleton groups and all-correct / all-wrong groups."""
    n_steps = draw(st.integers(2, 6))
    n_prompts = draw(st.integers(min_prompts, 6))
    rows = []
    for step in range(n_steps):
        for p in range(n_prompts):
            g = draw(st.integers(1, 4))
            mode = draw(st.sampled_from(["mixed", "all", "none"]))
            for _ in range(g):
                r = {"mixed": draw(st.booleans()), "all": True, "none": False}[mode]
                length = draw(st.integers(1, 500))
                rows.append(
                    (step, f"p{p}{'h' if p % 2 else ''}", r, length, draw(st.integers(0, length)))
                )
    return frame(rows)


def _scale(s: pd.Series) -> float:
    return max(1.0, abs(s["L0"]), abs(s["L1"]))


@settings(max_examples=60, deadline=None)
@given(runs())
def test_terms_sum_to_total_and_work_plus_redundant(run: pd.DataFrame) -> None:
    b, a = d.windows(run["step"], fraction=0.3)
    s = d.decompose(run, b, a)
    assert np.isfinite(s[d.TERMS]).all()
    assert abs(s[SPLIT].sum() - s["total"]) <= 1e-9 * _scale(s)
    assert s["total"] == pytest.approx(s["L1"] - s["L0"], abs=1e-9 * _scale(s))
    for cls in ("correct", "incorrect"):
        parts = s[f"within_{cls}_work"] + s[f"within_{cls}_redundant"]
        assert abs(parts - s[f"within_{cls}"]) <= 1e-9 * _scale(s)


@settings(max_examples=50, deadline=None)
@given(runs(), st.lists(st.integers(-50, 300), min_size=1), st.randoms(use_true_random=False))
def test_change_only_in_incorrect_lengths(run: pd.DataFrame, deltas: list[int], rnd) -> None:
    before = run[run["step"] == 0]
    after = before.assign(step=1).reset_index(drop=True)
    wrong = after["reward"] == 0
    shift = np.resize(np.asarray(deltas, float), len(after))
    after.loc[wrong, "length"] = np.maximum(after.loc[wrong, "length"] + shift[wrong], 0)
    after = after.sample(frac=1, random_state=rnd.randint(0, 999))  # order must not matter
    s = d.decompose(pd.concat([before, after]), [0], [1])
    assert s["mix"] == 0 and s["within_correct"] == 0
    assert s["within_incorrect"] == pytest.approx(s["total"], abs=1e-9 * _scale(s))


@settings(max_examples=50, deadline=None)
@given(
    st.lists(st.booleans(), min_size=1, max_size=30),
    st.lists(st.booleans(), min_size=1, max_size=30),
    st.integers(1, 400),
    st.integers(1, 400),
)
def test_change_only_in_accuracy(r0: list[bool], r1: list[bool], lc: int, lw: int) -> None:
    """Fixed class lengths, any accuracies (an empty class included): all change is mix."""
    rows = [(0, f"p{i}", r, lc if r else lw) for i, r in enumerate(r0)]
    rows += [(1, f"p{i}", r, lc if r else lw) for i, r in enumerate(r1)]
    s = d.decompose(frame(rows), [0], [1])
    assert s["within_correct"] == 0 and s["within_incorrect"] == 0
    assert s["mix"] == pytest.approx(s["total"], abs=1e-9 * _scale(s))
    assert s["mix"] == pytest.approx((np.mean(r1) - np.mean(r0)) * (lc - lw))


@settings(max_examples=40, deadline=None)
@given(runs(), st.integers(0, 10_000))
def test_invariant_to_row_order(run: pd.DataFrame, seed: int) -> None:
    b, a = d.windows(run["step"], fraction=0.5)
    shuffled = run.sample(frac=1, random_state=seed)
    pd.testing.assert_series_equal(d.decompose(run, b, a), d.decompose(shuffled, b, a), rtol=1e-12)
    ci = d.decompose_with_intervals(run, b, a, n_boot=50, seed=3)
    ci2 = d.decompose_with_intervals(shuffled, b, a, n_boot=50, seed=3)
    pd.testing.assert_frame_equal(ci, ci2, rtol=1e-9)


# --------------------------------------------------------------------------- empty classes


def test_class_empty_in_one_window() -> None:
    """No correct response at step 0: L_c is held at its step-1 value, mix carries the jump."""
    run = frame([(0, "A", 0, 20), (0, "B", 0, 40), (1, "A", 1, 10), (1, "B", 0, 60)])
    s = d.decompose(run, [0], [1])
    assert math.isnan(s["Lc0"]) and s["Lc1"] == 10
    assert s["within_correct"] == 0
    assert s["mix"] == pytest.approx(0.5 * (10 - 45))
    assert s["within_incorrect"] == pytest.approx(0.75 * 30)
    assert s[SPLIT].sum() == pytest.approx(s["total"]) == pytest.approx(35 - 30)


def test_class_empty_in_both_windows_drops_out() -> None:
    run = frame([(0, "A", 0, 20), (0, "B", 0, 40), (1, "A", 0, 10), (1, "B", 0, 60)])
    ci = d.decompose_with_intervals(run, [0], [1], n_boot=20).set_index("quantity")
    s = ci["value"]
    assert math.isnan(s["Lc0"]) and math.isnan(s["Lc1"])
    assert s["mix"] == 0 and s["within_correct"] == 0
    assert s["within_incorrect"] == s["total"] == 5
    assert ci.loc["within_incorrect", "share"] == 1
    assert np.isfinite(ci.loc[d.TERMS, ["lo", "hi"]].to_numpy()).all()


def test_zero_total_share_is_nan() -> None:
    run = frame([(0, "A", 1, 10), (0, "B", 0, 30), (1, "A", 1, 10), (1, "B", 0, 30)])
    ci = d.decompose_with_intervals(run, [0], [1], n_boot=20).set_index("quantity")
    assert ci.loc["total", "value"] == 0
    assert ci.loc[d.TERMS, "share"].isna().all()


# --------------------------------------------------------------------------- bootstrap


def _synthetic(n_prompts: int, seed: int = 0) -> pd.DataFrame:
    """Accuracy rises 0.3 -> 0.6 and incorrect responses grow by ~40 characters."""
    rng = np.random.default_rng(seed)
    rows = []
    for step, (acc, grow) in enumerate([(0.3, 0), (0.6, 40)]):
        for p in range(n_prompts):
            for _ in range(4):
                c = rng.random() < acc
                length = 100 + rng.integers(-20, 21) + (0 if c else grow)
                rows.append((step, f"p{p}", c, int(length)))
    return frame(rows)


def test_interval_contains_point_and_shrinks_with_prompts() -> None:
    widths = []
    for n_prompts in (20, 320):
        ci = d.decompose_with_intervals(_synthetic(n_prompts), [0], [1], n_boot=400, seed=1)
        terms = ci[ci["kind"] == "term"]
        assert ((terms["lo"] <= terms["value"]) & (terms["value"] <= terms["hi"])).all()
        stats = ci[ci["quantity"].isin(["a0", "a1", "Lc0", "Lw1"])]
        assert ((stats["lo"] <= stats["value"]) & (stats["value"] <= stats["hi"])).all()
        widths.append((terms["hi"] - terms["lo"]).to_numpy())
    assert (widths[1] < widths[0] / 2).all()  # 16x the prompts: ~1/4 the width


def test_layout() -> None:
    ci = d.decompose_with_intervals(HAND, [0], [1], n_boot=10)
    assert list(ci.columns) == list(d.INTERVAL_COLUMNS)
    assert list(ci["quantity"]) == d.TERMS + d.STATS
    assert (ci["kind"] == np.where(ci["quantity"].isin(d.TERMS), "term", "stat")).all()
    assert ci.set_index("quantity").loc["total", "share"] == 1


def test_vectorized_bootstrap_matches_loop() -> None:
    run = _synthetic(7, seed=2)
    prompts = sorted(run["prompt_id"].unique())
    counts = np.random.default_rng(5).multinomial(7, np.full(7, 1 / 7), size=4)  # (4, 7)
    counts[0] = 0
    counts[0, 0] = 7  # one prompt drawn 7 times
    fast = d.bootstrap_terms(run, [0], [1], counts)
    for b, row in enumerate(counts):
        resampled = pd.concat(
            [
                run[run["prompt_id"] == p]
                for p, c in zip(prompts, row, strict=True)
                for _ in range(c)
            ]
        )
        slow = d.decompose(resampled, [0], [1]).drop("n_prompts")
        np.testing.assert_allclose(fast.iloc[b].to_numpy(), slow.to_numpy(), rtol=1e-10)


# --------------------------------------------------------------------------- options and errors


def test_resample_rounds_and_tokens_and_missing_split() -> None:
    refill = HAND.iloc[:2].assign(resample_round=1, length=1000.0, redundant=1000.0 - 5)
    run = pd.concat([HAND, refill])
    pd.testing.assert_series_equal(d.decompose(run, [0], [1]), d.decompose(HAND, [0], [1]))
    assert d.decompose(run, [0], [1], resample_round=None)["L0"] > 100
    tok = d.decompose(HAND, [0], [1], length="tokens")
    assert tok["total"] == pytest.approx(-1 / 4)
    assert tok[[t for t in d.TERMS if "work" in t or "redundant" in t]].isna().all()
    no_split = d.decompose(HAND.assign(work=np.nan, redundant=np.nan), [0], [1])
    assert np.isfinite(no_split[["total", *SPLIT]]).all()
    assert math.isnan(no_split["within_correct_work"])


@pytest.mark.parametrize(
    ("table", "before", "match"),
    [
        (HAND.drop(columns="work"), [0], "lacks column"),
        (HAND.assign(reward=0.5), [0], "reward must be 1"),
        (HAND, [7], "before window"),
    ],
)
def test_errors(table: pd.DataFrame, before: list[int], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        d.decompose(table, before, [1])


def test_windows() -> None:
    assert d.windows(range(100)) == (tuple(range(10)), tuple(range(90, 100)))
    assert d.windows(range(30)) == (tuple(range(3)), tuple(range(27, 30)))
    assert d.windows([5]) == ((5,), (5,))
    assert d.windows([0, 3, 3, 1]) == ((0,), (3,))  # at least one step each
    assert d.windows(range(10), fraction=0.5) == (tuple(range(5)), tuple(range(5, 10)))
    assert d.windows(range(20), first=(0, 4), last=(15, 99)) == (
        tuple(range(5)),
        tuple(range(15, 20)),
    )
    with pytest.raises(ValueError, match="fraction"):
        d.windows(range(5), fraction=0)
    with pytest.raises(ValueError, match="holds none"):
        d.windows(range(5), last=(10, 20))


# --------------------------------------------------------------------------- curves


@settings(max_examples=30, deadline=None)
@given(runs())
def test_length_curves_match_loop(run: pd.DataFrame) -> None:
    band_of = {"p0": "b0", "p1h": "b1"}  # other prompts are unrated
    curves = d.length_curves(run, band_of=band_of)
    assert list(curves.columns) == d.CURVE_COLUMNS
    for row in curves.itertuples():
        sel = run[run["step"] == row.step]
        if row.band != "all":
            sel = sel[sel["prompt_id"].map(lambda p: band_of.get(p, d.UNRATED)) == row.band]
        c = sel["reward"] == 1
        assert row.n == len(sel)
        assert row.accuracy == pytest.approx(c.mean())
        assert row.mean_len == pytest.approx(sel["length"].mean())
        for name, col, mask in [
            ("mean_len_correct", "length", c),
            ("mean_len_incorrect", "length", ~c),
            ("mean_work_correct", "work", c),
            ("mean_redundant_correct", "redundant", c),
            ("mean_work_incorrect", "work", ~c),
            ("mean_redundant_incorrect", "redundant", ~c),
        ]:
            want = sel.loc[mask, col].mean() if mask.any() else math.nan
            assert getattr(row, name) == pytest.approx(want, nan_ok=True)
    per_step = curves[curves["band"] == "all"]
    assert list(per_step["step"]) == sorted(run["step"].unique())


def test_length_curves_default_bands_are_difficulty() -> None:
    curves = d.length_curves(HAND)
    assert list(curves["band"]) == ["all", "easy", "all", "easy"]  # prompts A, B are "easy"
    assert curves["n"].tolist() == [3, 3, 4, 4]

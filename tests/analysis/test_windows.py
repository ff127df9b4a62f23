"""The decomposition across windows (analysis.training.windows): hand numbers at two window
fractions, and the share withheld where the total's interval holds 0."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from grpo_dial.analysis.training.windows import WINDOW_COLUMNS, window_sensitivity


def _run(correct_slope: float, wrong_slope: float, steps: int = 10, prompts: int = 6):
    """Every step, every prompt: one correct response of length 10 + correct_slope * step and one
    wrong one of 10 + wrong_slope * step (accuracy 1/2 throughout: no mix term)."""
    rows = []
    for s in range(1, steps + 1):
        for p in range(prompts):
            for reward, slope in ((1, correct_slope), (0, wrong_slope)):
                n = 10 + slope * s
                rows.append({"step": s, "prompt_id": f"p{p}", "group": p, "reward": reward,
                             "length": n, "work": n, "redundant": 0.0,
                             "resample_round": 0, "difficulty": 0.5})  # fmt: skip
    return pd.DataFrame(rows)


def test_the_split_at_each_fraction_by_hand():
    table = window_sensitivity(_run(0.0, 1.0), [0.1, 0.2], n_boot=50)
    assert list(table.columns) == list(WINDOW_COLUMNS)
    t = table.set_index("window_fraction")
    # f = 0.1: steps {1} vs {10}; wrong lengths 11 -> 20 at weight 1/2: +4.5 in all, all wrong
    assert t.at[0.1, "total"] == pytest.approx(4.5) and t.at[0.1, "within_incorrect"] == 4.5
    assert t.at[0.1, "within_correct"] == 0.0 and t.at[0.1, "mix"] == 0.0
    # f = 0.2: steps {1, 2} vs {9, 10}; wrong 11.5 -> 19.5: +4.0
    assert t.at[0.2, "within_incorrect"] == pytest.approx(4.0)
    # identical prompts: the bootstrap cannot move a term; the total excludes 0, share 100%
    assert t.at[0.2, "total_lo"] == pytest.approx(4.0) and t.at[0.2, "share_reported"]
    assert t.at[0.2, "incorrect_share"] == pytest.approx(1.0)


def test_the_share_is_withheld_where_the_total_holds_0():
    # wrong responses grow by as much as correct ones shrink: the total is 0 at every fraction
    table = window_sensitivity(_run(-1.0, 1.0), [0.1, 0.3], n_boot=50)
    assert np.allclose(table["total"], 0.0)
    assert np.allclose(table["within_incorrect"], [4.5, 3.5])  # (20 - 11) / 2, (19 - 12) / 2
    assert np.allclose(table["within_correct"], [-4.5, -3.5])
    assert not table["share_reported"].any() and table["incorrect_share"].isna().all()


def test_no_fraction_is_refused():
    with pytest.raises(ValueError, match="at least one window fraction"):
        window_sensitivity(_run(0.0, 1.0), [])


def _noisy(seed: int = 3, steps: int = 10, prompts: int = 12) -> pd.DataFrame:
    """Prompts that differ (random lengths and correctness), so the bootstrap moves the terms."""
    rng = np.random.default_rng(seed)
    rows = []
    for s in range(1, steps + 1):
        for p in range(prompts):
            for _ in range(4):
                reward = int(rng.random() < 0.5)
                n = float(10 + rng.integers(0, 6) + (0.3 * s if reward == 0 else 0.05 * s))
                rows.append({"step": s, "prompt_id": f"p{p}", "group": p, "reward": reward,
                             "length": n, "work": n, "redundant": 0.0, "resample_round": 0,
                             "difficulty": 0.5})  # fmt: skip
    return pd.DataFrame(rows)


@pytest.mark.parametrize(("kwargs", "call"), [
    ({}, {"n_boot": 1000, "seed": 0, "level": 0.9}),  # the defaults
    ({"n_boot": 37, "seed": 5, "level": 0.8}, {"n_boot": 37, "seed": 5, "level": 0.8}),
])  # fmt: skip
def test_each_row_is_the_decomposition_at_that_window_with_its_bootstrap(kwargs, call):
    """An independent reference: decompose_with_intervals at each fraction's windows, the same
    bootstrap (replicates, seed, level); the share and its interval only where the total's
    interval excludes 0."""
    from grpo_dial.analysis.training.decompose import decompose_with_intervals, windows

    responses = _noisy()
    table = window_sensitivity(responses, [0.1, 0.3], **kwargs)
    for _, row in table.iterrows():
        before, after = windows(responses["step"].unique(), fraction=row["window_fraction"])
        ref = decompose_with_intervals(responses, before, after, **call).set_index("quantity")
        for q in ("total", "within_incorrect", "within_correct", "mix"):
            assert row[q] == ref.at[q, "value"]
            assert (row[f"{q}_lo"], row[f"{q}_hi"]) == (ref.at[q, "lo"], ref.at[q, "hi"])
        excludes = ref.at["total", "lo"] > 0 or ref.at["total", "hi"] < 0
        assert row["share_reported"] == excludes
        got = row[["incorrect_share", "incorrect_share_lo", "incorrect_share_hi"]].to_numpy(float)
        want = ref.loc["within_incorrect", ["share", "share_lo", "share_hi"]].to_numpy(float)
        assert np.array_equal(got, want if excludes else np.full(3, np.nan), equal_nan=True)


def test_a_total_just_above_0_is_reported():
    """A total whose interval lies in (0, 1): above 0, so its share is reported."""
    table = window_sensitivity(_run(0.0, 0.1), [0.2], n_boot=20)  # wrong +0.4 at weight 1/2
    row = table.iloc[0]
    assert 0 < row["total_lo"] < 1 and row["share_reported"]
    assert row["incorrect_share"] == pytest.approx(1.0)
    assert row["incorrect_share_lo"] == pytest.approx(1.0)


def test_no_fraction_is_refused_in_one_line():
    with pytest.raises(ValueError, match="^window_sensitivity needs at least one window fraction$"):
        window_sensitivity(_run(0.0, 1.0), ())

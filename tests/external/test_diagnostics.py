"""Diagnostics of an imported run: silent fractions per step against a loop reference and hand
numbers, the run's pass-rate table, the one-row-per-metric summary, and an imported TRL fixture
going through all of them and the length decomposition."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_importers import write_trl

from grpo_dial.analysis.training import decompose as d
from grpo_dial.external.diagnostics import (
    SILENT_COLUMNS,
    SUMMARY_METRICS,
    group_checks,
    run_passrates,
    run_summary,
    run_warnings,
    silent_by_step,
)
from grpo_dial.external.importers import import_trl
from grpo_dial.passrates.tables import PASSRATE_COLUMNS, validate_passrates


def responses(groups: list[tuple[int, str, list[int]]], length_of=len) -> pd.DataFrame:
    """groups of (step, prompt_id, rewards) -> a responses table; group numbers per step in
    order, length = 10 + position within the group (or length_of)."""
    rows, counter = [], {}
    for step, pid, rewards in groups:
        g = counter.setdefault(step, 0)
        counter[step] += 1
        for i, r in enumerate(rewards):
            rows.append(
                {
                    "step": step,
                    "prompt_id": pid,
                    "group": g,
                    "reward": float(r),
                    "length": 10 + i + 5 * r,
                    "difficulty": "hard" if pid.startswith("h") else "easy",
                    "work": np.nan,
                    "redundant": np.nan,
                    "resample_round": 0,
                }
            )
    return pd.DataFrame(rows)


# A: 4 responses, 2 correct (p 1/2); B: 3, 0 correct (p 0); C: 3, 3 correct (p 1);
# h: 1, 1 correct (singleton, p 1)
HAND = responses(
    [
        (0, "A", [1, 0]),
        (0, "B", [0, 0]),
        (0, "h", [1]),
        (1, "A", [1, 0]),
        (1, "B", [0]),
        (1, "C", [1, 1, 1]),
    ]
)


def test_silent_hand_numbers():
    s = silent_by_step(HAND)
    assert tuple(s.columns) == SILENT_COLUMNS
    assert list(s["step"]) == [0, 1] and list(s["n_groups"]) == [3, 3]
    # step 0: A (k 1 of 2) speaks, B (0 of 2) all wrong, h (1 of 1) all correct
    assert s["silent_fraction"][0] == pytest.approx(2 / 3)
    assert s["all_correct_fraction"][0] == pytest.approx(1 / 3)
    assert s["all_wrong_fraction"][0] == pytest.approx(1 / 3)
    # expected: A 0.5^2 + 0.5^2 = 0.5, B (p 0) 1, h (p 1, G 1) 1
    assert s["expected_silent"][0] == pytest.approx((0.5 + 1 + 1) / 3)
    assert s["expected_all_correct"][0] == pytest.approx((0.25 + 0 + 1) / 3)
    assert s["expected_all_wrong"][0] == pytest.approx((0.25 + 1 + 0) / 3)
    # step 1: A speaks, B (G 1) all wrong, C all correct
    assert s["silent_fraction"][1] == pytest.approx(2 / 3)
    assert s["expected_silent"][1] == pytest.approx((0.5 + 1 + 1) / 3)


def loop_silent(df: pd.DataFrame) -> dict[int, tuple[float, ...]]:
    """Slow reference: per step, mean over groups of (silent, all correct, all wrong, expected
    silent, expected all correct, expected all wrong)."""
    p = {}
    for pid in set(df["prompt_id"]):
        r = df[df["prompt_id"] == pid]["reward"].tolist()
        p[pid] = sum(r) / len(r)
    out = {}
    for step in sorted(set(df["step"])):
        rows = []
        at = df[df["step"] == step]
        for g in sorted(set(at["group"])):
            grp = at[at["group"] == g]
            k, G, q = grp["reward"].sum(), len(grp), p[grp["prompt_id"].iloc[0]]
            rows.append((k in (0, G), k == G, k == 0, q**G + (1 - q) ** G, q**G, (1 - q) ** G))
        out[step] = tuple(float(np.mean([r[j] for r in rows])) for j in range(6))
    return out


@settings(max_examples=50, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.integers(0, 4),
            st.sampled_from(["a", "b", "c", "h1"]),
            st.lists(st.integers(0, 1), min_size=1, max_size=6),
        ),
        min_size=1,
        max_size=12,
    )
)
def test_silent_matches_loop_reference(groups):
    df = responses(groups)
    got = silent_by_step(df)
    ref = loop_silent(df)
    assert list(got["step"]) == sorted(ref)
    for _, row in got.iterrows():
        want = ref[int(row["step"])]
        np.testing.assert_allclose(row[list(SILENT_COLUMNS[2:8])].to_numpy(float), want, atol=1e-12)


def test_silent_errors_and_first_round_only():
    with pytest.raises(ValueError, match="lacks column"):
        silent_by_step(HAND.drop(columns="group"))
    with pytest.raises(ValueError, match="reward must be 1"):
        silent_by_step(HAND.assign(reward=HAND["reward"] * 2 - 1))
    mixed = HAND.copy()
    mixed.loc[mixed.index[1], "prompt_id"] = "Z"
    with pytest.raises(ValueError, match="group 0 of step 0 holds more than one"):
        silent_by_step(mixed)
    refill = HAND.iloc[[0]].assign(resample_round=1, reward=0.0, step=0, group=9)
    pd.testing.assert_frame_equal(silent_by_step(pd.concat([HAND, refill])), silent_by_step(HAND))


def test_run_passrates_validates_and_counts():
    t = run_passrates(HAND, "myrun")
    assert tuple(t.columns) == PASSRATE_COLUMNS
    validate_passrates(t)
    by = t.set_index("prompt_id")
    for pid in set(HAND["prompt_id"]):
        rows = HAND[HAND["prompt_id"] == pid]
        assert by.loc[pid, "n"] == len(rows) and by.loc[pid, "k"] == rows["reward"].sum()
        correct = rows[rows["reward"] == 1]["length"]
        wrong = rows[rows["reward"] == 0]["length"]
        for col, part in (("mean_len_correct", correct), ("mean_len_incorrect", wrong)):
            want = part.mean() if len(part) else math.nan
            got = by.loc[pid, col]
            assert (math.isnan(want) and pd.isna(got)) or got == pytest.approx(want)
    assert (t["source"] == "myrun").all()
    assert by.loc["h", "difficulty"] == "hard" and by.loc["A", "difficulty"] == "easy"
    assert run_passrates(HAND.drop(columns="difficulty"), "x")["difficulty"].isna().all()


def test_run_summary_numbers():
    s = silent_by_step(HAND)
    terms = d.decompose_with_intervals(HAND, [0], [1], n_boot=50)
    summary = run_summary(HAND, s, terms, fraction=0.5)
    assert list(summary.columns) == ["metric", "value"]
    assert tuple(summary["metric"]) == SUMMARY_METRICS
    v = dict(zip(summary["metric"], summary["value"], strict=True))
    assert (v["steps"], v["prompts"], v["responses"]) == (2, 4, 11)
    assert v["accuracy_first"] == pytest.approx(2 / 5)
    assert v["accuracy_last"] == pytest.approx(4 / 6)
    first = HAND[HAND["step"] == 0]["length"].mean()
    assert v["mean_length_first"] == pytest.approx(first)
    assert v["silent_fraction_first"] == pytest.approx(s["silent_fraction"][0])
    # the unbiased closed form, as the figure's dashed curves draw it, not the plug-in p^G
    unbiased = s["unbiased_all_correct"][1] + s["unbiased_all_wrong"][1]
    assert v["expected_silent_last"] == pytest.approx(unbiased)
    assert unbiased != pytest.approx(s["expected_silent"][1])
    within = terms.set_index("quantity").loc["within_incorrect"]
    assert v["within_incorrect_share"] == pytest.approx(within["share"])
    assert v["within_incorrect_share_lo"] == pytest.approx(within["share_lo"])
    assert v["length_change"] == pytest.approx(terms.set_index("quantity").loc["total", "value"])
    with pytest.raises(ValueError, match="within_incorrect"):
        run_summary(HAND, s, terms[terms["quantity"] != "within_incorrect"])
    with pytest.raises(ValueError, match="silent table"):
        run_summary(HAND, s.drop(columns="n_groups"), terms)


def test_imported_trl_run_end_to_end(tmp_path):
    df, _ = import_trl(write_trl(tmp_path), reward_column="accuracy_reward")
    silent = silent_by_step(df)
    assert list(silent["n_groups"]) == [3, 2]
    # step 1: A speaks, B all wrong, C (singleton) all correct; step 2: D all correct, A speaks
    assert list(silent["silent_fraction"]) == pytest.approx([2 / 3, 1 / 2])
    table = run_passrates(df, "trl-fixture")
    assert dict(zip(table["prompt_id"], table["n"], strict=True)) == (
        df.groupby("prompt_id").size().to_dict()
    )
    terms = d.decompose_with_intervals(df, [1], [2], n_boot=50)
    summary = run_summary(df, silent, terms)
    assert summary["value"].notna().sum() >= 12


def test_unbiased_expected_silent_equals_a_comb_loop():
    import math

    rng = np.random.default_rng(3)
    rows = []
    for step in range(1, 9):
        for group, prompt in enumerate(rng.choice(5, 3, replace=False)):
            for _ in range(4):
                rows.append({"step": step, "group": group, "prompt_id": f"p{prompt}",
                             "reward": float(rng.random() < 0.2 + 0.15 * prompt)})  # fmt: skip
    df = pd.DataFrame(rows)
    s = silent_by_step(df).set_index("step")
    totals = df.groupby("prompt_id")["reward"].agg(["sum", "size"])
    for step, frame in df.groupby("step"):
        expected = []
        for _, grp in frame.groupby("group"):
            c, n = (
                int(totals.loc[grp["prompt_id"].iloc[0], "sum"]),
                int(totals.loc[grp["prompt_id"].iloc[0], "size"]),
            )
            expected.append(math.comb(c, len(grp)) / math.comb(n, len(grp)))
        assert s.loc[step, "unbiased_all_correct"] == pytest.approx(np.mean(expected))


def test_group_checks_count_unequal_groups_and_spot_filtered_runs():
    mixed = responses([(1, "a", [1, 0, 1, 0]), (1, "b", [1, 1, 1, 1]), (2, "a", [0]),
                       (2, "c", [1, 0, 0, 0, 1, 0, 0, 1])])  # fmt: skip
    # q_g = p^G + (1-p)^G at run-wide p over groups of G >= 2: a 2/5 at G 4 (0.1552), b 1 (1),
    # c 3/8 at G 8; the lone response of a is no group of two
    q = [0.6**4 + 0.4**4, 1.0, 0.375**8 + 0.625**8]
    assert group_checks(mixed) == pytest.approx({
        "groups": 4.0, "group_size": 4.0, "unequal_groups": 2.0, "damaged_groups": 0.0,
        "group_size_uncertain": 0.0, "all_groups_informative": 0.0,
        "expected_silent_groups": sum(q), "p_no_silent_groups": 0.0, "filtered": 0.0})  # fmt: skip
    # every group of two or more informative; a singleton (k = G = 1) says nothing either way.
    # Three groups of 2 at p = 1/2: q = 1/2 each, none silent has P0 = 1/8: not called filtered
    filtered = responses([(1, "a", [1, 0]), (1, "b", [0, 1]), (2, "a", [1, 0]), (2, "c", [1])])
    checks = group_checks(filtered)
    assert checks["all_groups_informative"] == 1.0 and checks["group_size"] == 2.0
    assert checks["unequal_groups"] == 1.0
    assert checks["expected_silent_groups"] == pytest.approx(1.5)
    assert checks["p_no_silent_groups"] == pytest.approx(1 / 8) and checks["filtered"] == 0.0
    # five such groups: P0 = 1/32 < 0.05, filtered
    five = responses([(s, "a", [1, 0]) for s in range(1, 6)])
    checks = group_checks(five)
    assert checks["p_no_silent_groups"] == pytest.approx(1 / 32) and checks["filtered"] == 1.0
    # five groups of 4 at p = 1/2: q = 1/8 each, P0 = (7/8)^5 = 0.513: expected 0.6, not filtered
    four = group_checks(responses([(s, "a", [1, 0, 1, 0]) for s in range(1, 6)]))
    assert four["expected_silent_groups"] == pytest.approx(5 / 8)
    assert four["p_no_silent_groups"] == pytest.approx((7 / 8) ** 5) and four["filtered"] == 0.0
    silent_only = responses([(1, "a", [0, 0]), (2, "a", [1, 1])])
    assert group_checks(silent_only)["all_groups_informative"] == 0.0


def test_run_warnings_name_the_failed_checks():
    def summary(**values):
        base = dict.fromkeys(SUMMARY_METRICS, 0.0) | {"groups": 10.0, "group_size": 4.0}
        merged = base | values
        return pd.DataFrame({"metric": list(merged), "value": list(merged.values())})

    assert run_warnings(summary()) == []
    assert run_warnings(summary(all_groups_informative=1.0)) == []  # P0 not small: no warning
    (line,) = run_warnings(summary(all_groups_informative=1.0, filtered=1.0,
                                   expected_silent_groups=12.34, p_no_silent_groups=2.1e-6))
    assert line.startswith("every group is informative (0 < k < G) where the closed form expects "
                           "12.3 silent ones (none with P = 2.1e-06)")  # fmt: skip
    assert "silent rates cannot be estimated" in line
    (line,) = run_warnings(summary(unequal_groups=2.0))
    assert line.startswith("2 of 10 whole groups differ from G = 4")
    (line,) = run_warnings(summary(unequal_groups=3.0, damaged_groups=3.0))
    assert line.startswith("3 of 10 groups lost rows in the import; G = 4 from the groups")
    (line,) = run_warnings(summary(damaged_groups=10.0, group_size_uncertain=1.0))
    assert "G = 4 (their most common size) is uncertain" in line

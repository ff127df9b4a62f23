"""The real-model bridge (analysis/aware/bridge.py) on a partly aware table, against hand numbers:
awareness 2 AUC - 1, the mean length, the normalizer's push on each path written out from its
definition (analysis/length_bias/pressure.py's docstring), and the closed form at the table's pass
rates, group size and sample std; the interval narrows with the level."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from grpo_dial.analysis.aware.bridge import length_bridge
from grpo_dial.core.length_drift import tail_drift


def _table() -> pd.DataFrame:
    """Six problems of 4 responses, correct lengths (10, 30) + 10 g and wrong (20, 40) + 10 g,
    and one of 3: correct 15, wrong 25 and 5. Wrong beats correct in 3 of 4 pairs of each
    4-group and 1 of 2 in the 3-group: AUC 19 / 26."""
    rows = []
    for g in range(6):
        for correct, length in ((True, 10), (True, 30), (False, 20), (False, 40)):
            rows.append((f"p{g}", correct, length + 10 * g))
    rows += [("p6", True, 15), ("p6", False, 25), ("p6", False, 5)]
    return pd.DataFrame(rows, columns=["problem_id", "correct", "length_chars"])


def _pressure(df: pd.DataFrame) -> tuple[float, float]:
    """P_wrong, P_correct of 1/|o| (sequence) with GRPO's sample-std advantages, by definition:
    sum over the path of A (w / w_bar - 1) (L - group mean L) / sum |A|, w = 1 / (B L)."""
    r = df["correct"].to_numpy(float)
    L = df["length_chars"].to_numpy(float)
    g = df.groupby("problem_id")
    a = (r - g["correct"].transform("mean").to_numpy(float)) / g["correct"].transform(
        lambda x: x.astype(float).std(ddof=1)
    ).to_numpy(float)
    w = 1 / (len(L) * L)
    push = a * (w / w.mean() - 1) * (L - g["length_chars"].transform("mean").to_numpy(float))
    scale = np.abs(a).sum()
    return float(push[a < 0].sum() / scale), float(push[a > 0].sum() / scale)


def test_bridge_of_a_partly_aware_table_by_hand():
    table = _table()
    b = length_bridge(table, n_boot=1).set_index("quantity")
    auc = 19 / 26
    assert b.loc["auc", "value"] == pytest.approx(auc)
    assert b.loc["awareness", "value"] == pytest.approx(2 * auc - 1)
    mean_length = (6 * 100 + 40 * 15 + 45) / 27
    assert b.loc["mean_length", "value"] == pytest.approx(mean_length)
    wrong, correct = _pressure(table)
    assert wrong > 0 > correct  # long wrong answers pushed longer, long right ones shorter
    assert b.loc["pressure_wrong", "value"] == pytest.approx(wrong)
    assert b.loc["pressure_correct", "value"] == pytest.approx(correct)
    assert b.loc["pressure_net", "value"] == pytest.approx(wrong + correct)
    # the closed form at each problem's pass rate, G the largest group (4), a geometric length
    # with the mean length (q = m / (1 + m)) as free tail after a core of 1, sample std
    q = mean_length / (1 + mean_length)
    p = np.array([0.5] * 6 + [1 / 3])
    u = tail_drift(p, q, q, 1.0, 4, 1.0, "sequence", 2 * auc - 1, ddof=1)
    assert b.loc["u_wrong", "value"] == pytest.approx(float(np.mean(u.wrong)), rel=1e-9)
    assert b.loc["u_correct", "value"] == pytest.approx(float(np.mean(u.correct)), rel=1e-9)
    assert b.loc["u_wrong", "value"] > 0 > b.loc["u_correct", "value"]
    assert (b["n_problems"] == 7).all()


def test_the_bridge_interval_narrows_with_the_level():
    wide = length_bridge(_table(), n_boot=30, level=0.9).set_index("quantity")
    narrow = length_bridge(_table(), n_boot=30, level=0.5).set_index("quantity")
    for q in ("mean_length", "pressure_wrong"):
        assert wide.loc[q, "lo"] < narrow.loc[q, "lo"] < narrow.loc[q, "hi"] < wide.loc[q, "hi"]
    with pytest.raises(ValueError, match="level"):
        length_bridge(_table(), level=1.0)

"""Pass-rate bands: every edge on the side the definition puts it, and the interval form the
closed forms use agrees with the per-prompt labels."""

from __future__ import annotations

import numpy as np
import pytest

from grpo_dial.core import bands


def test_band_edges():
    eps = 1e-9
    cases = {
        0.0: "never",
        eps: "extreme",
        0.05: "extreme",
        0.1 - eps: "extreme",
        0.1: "other",
        0.2: "other",
        0.4 - eps: "other",
        0.4: "medium",
        0.5: "medium",
        0.6: "medium",
        0.6 + eps: "other",
        0.7: "other",
        0.9: "other",
        0.9 + eps: "extreme",
        0.95: "extreme",
        1 - eps: "extreme",
        1.0: "always",
    }
    got = bands.pass_rate_band(np.array(list(cases)))
    assert got.tolist() == list(cases.values())
    assert bands.pass_rate_band(np.array([np.nan])).tolist() == ["other"]


@pytest.mark.parametrize("name", ["never", "always", "extreme", "medium"])
def test_intervals_match_the_labels(name):
    p = np.r_[np.linspace(0, 1, 1001), 0.1, 0.4, 0.6, 0.9]  # (N,) a grid and every edge
    _, intervals = bands.BAND_INTERVALS[name]
    np.testing.assert_array_equal(bands.in_band(p, intervals), bands.pass_rate_band(p) == name)


def test_band_words_name_the_edges():
    words = {name: w for name, (w, _) in bands.BAND_INTERVALS.items()}
    assert words == {
        "never": "p=0",
        "always": "p=1",
        "extreme": "0<p<0.1 or 0.9<p<1",
        "medium": "0.4<=p<=0.6",
    }


def test_in_band_closed_ends():
    p = np.array([0.2, 0.3, 0.5])
    for closed, expected in [
        ("both", [True, True, False]),
        ("neither", [False, False, False]),
        ("left", [True, False, False]),
        ("right", [False, True, False]),
    ]:
        assert bands.in_band(p, [(0.2, 0.3, closed)]).tolist() == expected


def test_band_order_puts_pass_rate_bands_first_low_to_high():
    assert bands.band_order(["other", "zeta", "always", "never", "unrated", "never"]) == [
        "never", "other", "always", "unrated", "zeta",
    ]  # fmt: skip
    assert bands.band_order(["hard", "easy"]) == ["easy", "hard"]

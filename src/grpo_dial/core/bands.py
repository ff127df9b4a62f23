"""Pass-rate bands of a prompt, by its base pass rate p; numpy only
(docs/design-notes.md#reference-numbers).

    never    p = 0
    extreme  0 < p < 0.1  or  0.9 < p < 1
    medium   0.4 <= p <= 0.6
    always   p = 1
    other    every other p (0.1 <= p < 0.4, 0.6 < p <= 0.9)

never / extreme / medium / always are unions of intervals (lo, hi, closed), `closed` as in
theory.mass_share ("both", "neither", "left", "right"), so the closed forms and the per-prompt
labels read the same edges. The Big-Math solve-rate bands of grpo_dial.data are another concept.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

Interval = tuple[float, float, str]

EXTREME_EDGES = (0.1, 0.9)  # extreme: 0 < p < lo or hi < p < 1 (the paper's 0.1 / 0.9)
MEDIUM_EDGES = (0.4, 0.6)  # medium: lo <= p <= hi

# name -> (the band's edges in words, its intervals); the order every band table uses.
BAND_INTERVALS: dict[str, tuple[str, tuple[Interval, ...]]] = {
    "never": ("p=0", ((0.0, 0.0, "both"),)),
    "always": ("p=1", ((1.0, 1.0, "both"),)),
    "extreme": (
        f"0<p<{EXTREME_EDGES[0]} or {EXTREME_EDGES[1]}<p<1",
        ((0.0, EXTREME_EDGES[0], "neither"), (EXTREME_EDGES[1], 1.0, "neither")),
    ),
    "medium": (f"{MEDIUM_EDGES[0]}<=p<={MEDIUM_EDGES[1]}", ((*MEDIUM_EDGES, "both"),)),
}
OTHER = "other"  # a p in none of BAND_INTERVALS
PASS_RATE_BANDS = ("never", "extreme", "medium", OTHER, "always")  # low p to high p
UNRATED = "unrated"  # a prompt the pass-rate table does not list


def in_band(p: np.ndarray, intervals: Iterable[Interval]) -> np.ndarray:
    """(N,) bool: p in the union of intervals, each end included as its `closed` says."""
    p = np.asarray(p, dtype=float)
    mask = np.zeros(p.shape, bool)
    for lo, hi, closed in intervals:
        left = p >= lo if closed in ("both", "left") else p > lo
        right = p <= hi if closed in ("both", "right") else p < hi
        mask |= left & right
    return mask


def pass_rate_band(p: np.ndarray) -> np.ndarray:
    """(N,) band names of PASS_RATE_BANDS (the bands are disjoint; p outside them is 'other')."""
    p = np.asarray(p, dtype=float)
    names = list(BAND_INTERVALS)
    return np.select([in_band(p, BAND_INTERVALS[n][1]) for n in names], names, OTHER)


def band_order(labels: Iterable[str]) -> list[str]:
    """The labels present, PASS_RATE_BANDS first (low p to high p), then any others sorted."""
    present = set(labels)
    known = [b for b in PASS_RATE_BANDS if b in present]
    return known + sorted(present - set(known))

"""core.bands: a missing pass rate (None, as a table join leaves it) is read as NaN, in no band:
'other'."""

import numpy as np

from grpo_dial.core.bands import BAND_INTERVALS, in_band, pass_rate_band


def test_a_missing_pass_rate_is_in_no_band():
    assert pass_rate_band([0.0, None, 0.05, 0.5, 1.0]).tolist() == [
        "never", "other", "extreme", "medium", "always",
    ]  # fmt: skip
    got = in_band([0.0, None, 1.0], BAND_INTERVALS["never"][1])
    assert got.dtype == np.bool_ and got.tolist() == [True, False, False]

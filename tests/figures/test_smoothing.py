"""The one smoothing of per-step curves: a centred rolling mean, shorter at the ends, within
each run."""

from __future__ import annotations

import numpy as np
import pandas as pd

from grpo_dial.figures.smoothing import rolling_mean, smooth_runs


def test_rolling_mean_is_centred_and_keeps_the_ends():
    got = rolling_mean(pd.Series([0.0, 3.0, 6.0, 9.0, 12.0]), 3)
    np.testing.assert_allclose(got, [1.5, 3.0, 6.0, 9.0, 10.5])


def test_smooth_runs_never_mixes_runs_and_sorts_by_step():
    df = pd.DataFrame({
        "dial": ["a"] * 3 + ["b"] * 3, "seed": 0, "step": [3, 1, 2, 1, 2, 3],
        "y": [30.0, 10.0, 20.0, 100.0, 200.0, 300.0],
    })  # fmt: skip
    out = smooth_runs(df, ["y"], 3)
    assert out["step"].tolist() == [1, 2, 3, 1, 2, 3]
    np.testing.assert_allclose(out["y"], [15, 20, 25, 150, 200, 250])
    assert df["y"].tolist()[0] == 30.0  # the input is left alone

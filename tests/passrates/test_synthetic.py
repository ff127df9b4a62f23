"""The synthetic Big-Math-like prior: Big-Math's ends, seeded, built by the dispatcher."""

from __future__ import annotations

import pandas as pd

from grpo_dial.passrates.loaders import load_passrates
from grpo_dial.passrates.synthetic import synthetic_bigmath_like


def test_synthetic_matches_bigmath_ends_and_is_seeded() -> None:
    table, report = synthetic_bigmath_like(n_prompts=20000, n=64, seed=0)
    assert report.n_kept == len(table) == 20000 and (table["n"] == 64).all()
    never, always = (table["k"] == 0).mean(), (table["k"] == 64).mean()
    # expected 4.0% and 7.2%; binomial sd at 20,000 prompts is 0.14% and 0.18%
    assert abs(never - 0.040) < 0.006 and abs(always - 0.072) < 0.008
    again, _ = synthetic_bigmath_like(n_prompts=20000, n=64, seed=0)
    pd.testing.assert_frame_equal(table, again)
    other, _ = synthetic_bigmath_like(n_prompts=20000, n=64, seed=1)
    assert not table["k"].equals(other["k"])
    small, _ = load_passrates({"kind": "synthetic", "n_prompts": 10, "n": 8, "seed": 3})
    assert len(small) == 10 and (small["n"] == 8).all() and small["k"].between(0, 8).all()

"""A synthetic Big-Math-like pass-rate table, for runs without the real data.

p ~ sum_j w_j Beta(a_j, b_j) (SYNTHETIC_MIXTURE), k ~ Binomial(n, p). The mixture is fitted by
least squares (Beta-binomial, n = 64) to the Big-Math numbers of
docs/design-notes.md#reference-numbers: it gives 4.0% never and 7.2% always solved, extreme mass
13.9% / 24.9% (Dr. GRPO / GRPO), medium 22.7% / 17.5%, silent fraction 59/44/32/23/17% at
G = 4..64 (expected values; a draw of 20,000 varies by ~0.2%).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from grpo_dial.data.reading import LoadReport
from grpo_dial.passrates.tables import passrate_table

SYNTHETIC_MIXTURE = (
    # (weight, a, b)
    (0.617, 4.46, 1.58),  # broad, leaning easy
    (0.149, 1.37, 40.0),  # hard: mass near p = 0.03
    (0.234, 40.0, 1.37),  # easy: mass near p = 0.97
)


def synthetic_bigmath_like(
    n_prompts: int = 20000, n: int = 64, seed: int = 0
) -> tuple[pd.DataFrame, LoadReport]:
    """Seeded Big-Math-like table: p ~ sum_j w_j Beta(a_j, b_j) (SYNTHETIC_MIXTURE), k ~ Bin(n, p).

    With n = 64: E[never solved] = 4.0%, E[always solved] = 7.2%, as in Big-Math.
    """
    n_prompts, n = int(n_prompts), int(n)
    if n_prompts < 1 or n < 1:
        raise ValueError(f"n_prompts and n must be >= 1, got n_prompts={n_prompts}, n={n}")
    w, a, b = (np.array(c, dtype=float) for c in zip(*SYNTHETIC_MIXTURE, strict=True))
    rng = np.random.default_rng(seed)
    comp = rng.choice(len(w), size=n_prompts, p=w / w.sum())  # (N,)
    p = rng.beta(a[comp], b[comp])  # (N,) latent pass rate
    k = rng.binomial(n, p)  # (N,)
    ids = np.char.add("synthetic-", np.arange(n_prompts).astype(str)).astype(object)
    table = passrate_table(ids, "synthetic", n, k)
    return table, LoadReport(name=f"synthetic:seed={seed}", n_read=n_prompts, n_kept=n_prompts)

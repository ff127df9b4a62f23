"""The run's tables built from one step's tensors: the identity's gradient mass per group by
hand, the mass per band, the step statistics and the band map."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
import torch

from grpo_dial.core.bands import PASS_RATE_BANDS, UNRATED
from grpo_dial.core.dial import preset
from grpo_dial.train import records as rec


def test_group_mass_mass_chunk_and_step_stats_hand_numbers():
    rewards = torch.tensor([1.0, 0, 0, 0, 1, 1, 0, 0, 1, 1, 1, 1, 1.0])
    gids = torch.tensor([0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3])  # k=1, k=2, silent, singleton
    s1, s2 = math.sqrt(3) / 4, 0.5
    for name, expected in [("grpo", [s1, s2, 0, 0]), ("dr_grpo", [s1**2, s2**2, 0, 0])]:
        dial = preset(name).replace(eps=0.0)
        _, mass = rec.group_mass(rewards, gids, dial)
        assert mass.tolist() == pytest.approx(expected, abs=1e-12)
    chunk = rec.mass_chunk(3, ["a", "b", "a", "b"], np.array([s1, s2, 0, 0]), ("a", "b", "c"))
    assert chunk["n_groups"] == [2, 2, 0]
    assert chunk["share"] == pytest.approx([s1 / (s1 + s2), s2 / (s1 + s2), 0.0])
    stats = rec.step_stats(rewards, gids, np.arange(13), torch.zeros(13, dtype=torch.bool),
                           np.full(13, np.nan), np.ones(13))  # fmt: skip
    assert stats["accuracy"] == pytest.approx(8 / 13)
    assert stats["silent_fraction"] == 0.5 and stats["all_correct_fraction"] == 0.5
    assert stats["all_wrong_fraction"] == 0.0 and math.isnan(stats["mean_work_correct"])
    assert stats["mean_len_incorrect"] == pytest.approx(np.mean([1, 2, 3, 6, 7]))


def test_band_map_by_pass_rate_table_or_difficulty_label():
    ids, labels = ["a", "b", "c", "d"], ["hard", "easy", "hard", "easy"]
    table = pd.DataFrame({"prompt_id": ["a", "b", "c"], "p_hat": [0.0, 0.5, 0.95]})
    bands, vocab = rec.band_map(ids, labels, table)
    assert bands == {"a": "never", "b": "medium", "c": "extreme", "d": UNRATED}
    assert vocab == (*PASS_RATE_BANDS, UNRATED)
    assert rec.band_map(ids[:3], labels[:3], table)[1] == PASS_RATE_BANDS  # all rated
    bands, vocab = rec.band_map(ids, labels, None)
    assert bands == dict(zip(ids, labels, strict=True)) and vocab == ("easy", "hard")
    with pytest.raises(ValueError, match="lacks column 'p_hat'"):
        rec.band_map(ids, labels, table.drop(columns="p_hat"))

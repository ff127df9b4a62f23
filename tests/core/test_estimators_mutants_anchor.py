"""core.estimators: the logged anchor keeps double precision."""

import types

import torch

from grpo_dial.core.dial import Dial
from grpo_dial.core.estimators import logged_values


def test_the_logged_anchor_is_the_mean_in_double_precision():
    batch = types.SimpleNamespace(group_ids=torch.tensor([0, 1]), rewards=[0, 1])
    got = logged_values(Dial(anchor="prompt"), {"anchor": [0.1, 0.1]}, batch)["anchor"]
    assert float(got) == 0.1  # float32 would give 0.10000000149...

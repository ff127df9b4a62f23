"""A toy estimator in one file, as a user would write one: the group's mean absolute deviation as
the scale slot, A_i = (r_i - b_i) / MAD_g (1 where MAD_g = 0), with its own Dial field, label,
logged column and preset. `registered()` registers it for one test and removes it after; the
tests of the slots, the strata, the refusals, the figures and the summary all use this one entry.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from grpo_dial.core.estimators import register_estimator, unregister_estimator
from grpo_dial.core.settings import Setting

NAME, LABEL, COLUMN = "toy_mad", "Toy MAD", "mad_scale"


def mad_scale(stats, dial):
    """(N,) the mean absolute deviation of each response's group, 1 where it is 0."""
    import torch

    dev = (stats.rewards - stats.mean[stats.index]).abs()  # (N,)
    mad = dev.new_zeros(stats.size.numel()).index_add_(0, stats.index, dev) / stats.size  # (M,)
    return torch.where(mad > 0, mad, 1.0)[stats.index]


def log(dial, inputs, batch) -> dict[str, float]:
    """The step's mean scale over its responses."""
    from grpo_dial.core.advantage import group_stats

    stats = group_stats(batch.rewards, batch.group_ids, dial.std_ddof)
    return {COLUMN: float(mad_scale(stats, dial).mean())}


@contextmanager
def registered() -> Iterator[None]:
    """The toy registered as estimator `toy_mad` (field and preset `toy_mad`) while inside."""
    register_estimator(
        NAME, label=LABEL, kind="scale",
        fields={NAME: Setting(False, "Divide by the group's mean absolute deviation (a toy).",
                              kind=bool)},
        active=lambda dial: dial.toy_mad, columns=(COLUMN,), log=log, preset={NAME: True},
    )(mad_scale)  # fmt: skip
    try:
        yield
    finally:
        unregister_estimator(NAME)

"""The aware sweep's grid: its awareness levels and the tail-frozen control's cell (the
optimizers are the config's `aware_sweep.optimizers`).

A level is the pair of mode accuracies (P(right | "="), P(right | "~")); at estimate rate 1/2 its
pass rate is 1/2 and its awareness a = 1 - 2 P(right | "~") (data/tasks/aware.py): a0 ... a80 are
a = 0, 0.2, 0.4, 0.6, 0.8. The workflow reads this module when it parses the rule files, so it
imports nothing (analysis/aware/dose.py, which uses these, pulls in scipy).
"""

from __future__ import annotations

LEVELS = {
    "a0": (0.5, 0.5), "a20": (0.6, 0.4), "a40": (0.7, 0.3), "a60": (0.8, 0.2), "a80": (0.9, 0.1),
}  # fmt: skip
REFERENCE_LEVEL = "a60"  # awareness 0.6, the aware study's default
BLIND_LEVEL = "a0"
FROZEN = "tail_frozen"  # the control arm without a tail gradient (analysis/aware/dose.py)
FROZEN_CELL = ("adamw", REFERENCE_LEVEL)  # (optimizer, level) it is trained at

__all__ = ["BLIND_LEVEL", "FROZEN", "FROZEN_CELL", "LEVELS", "REFERENCE_LEVEL"]

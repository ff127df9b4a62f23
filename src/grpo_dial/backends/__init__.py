"""The training backends side by side behind one interface: `train_arm(job)` trains one arm and
seed on the backend its resolved arm names (core.dial.Arm.backend, decided once at DAG build),
and every backend writes the same tables.

- `own` (backends/own.py): the pipeline's trainer, grpo_dial.train; every dial field.
- `trl` (backends/trl/): TRL's GRPOTrainer. `config` translates a dial into GRPOConfig and
  refuses, by name, what TRL cannot express (no torch at import: the DAG build calls it);
  `launch` runs a job in its own process or under accelerate; `run` is the trainer; `identity`
  probes the std identity on TRL's batches; `tables` turns TRL's completion logs into the own
  trainer's tables.
`in_process(arm)`: the trainer a study drives in its own process (the aware sweep's cells and
probe; backends/own_cells.py), the own trainer's alone: any other backend is refused by name.
Reading other trainers' logged runs (diagnose) is grpo_dial.external's, not this room's.
"""

from __future__ import annotations

from grpo_dial.backends.job import Job
from grpo_dial.core.dial import Arm


def train_arm(job: Job) -> None:
    """Train `job` on its arm's backend (own | trl)."""
    if job.arm.backend == "trl":
        from grpo_dial.backends.trl.launch import train  # TRL's GRPOTrainer: docs/backends.md
    else:
        from grpo_dial.backends.own import train
    train(job)


def in_process(arm: Arm):
    """The module that trains `arm` inside the calling process (`train_cell`, `probe_batches`,
    `cell_config`): the own trainer's; another backend raises one line naming it."""
    if arm.backend != "own":
        raise ValueError(
            f"backend {arm.backend!r}: the aware sweep's cells and probe train in their own "
            "process on the own trainer; set the arm's backend to 'own'"
        )
    from grpo_dial.backends import own_cells

    return own_cells


__all__ = ["Job", "in_process", "train_arm"]

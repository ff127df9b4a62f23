"""The own backend: the pipeline's trainer (grpo_dial.train.loop.train_run), every dial field."""

from __future__ import annotations

from pathlib import Path

from grpo_dial.backends.job import Job


def train(job: Job) -> None:
    """Train `job` with the own trainer; resumes from its checkpoint when one exists."""
    from grpo_dial.data.tasks import task_from_spec
    from grpo_dial.train.loop import train_run

    train_run(
        job.base,
        task_from_spec(job.task),
        job.arm.dial,
        job.config,
        outputs=dict(job.outputs),
        checkpoint_dir=Path(job.checkpoint_dir),
        pass_rates=job.pass_rates,
    )

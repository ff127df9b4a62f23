"""What a run checks after every step: finite weights, non-finite steps in a row, and the
task's answer checker (timeouts, errors, crashes, bad references).

Non-finite guard: a step whose loss or gradient is non-finite is skipped by the update (no
optimizer step); `max_nonfinite_steps` such steps IN A ROW stop the run with one line, a finite
step resets the count. Weights are checked after every update: non-finite weights stop the run at
once (no later step could repair them), and `resume.save` refuses to checkpoint them, so the last
good checkpoint is what remains.

Checker accounting: a task with `verify_counts()` (the math task) reports its verifier's tallies;
each step row gets the increase of timeouts, errors, crashes and bad references since the
previous row (step 1's includes the step-0 evaluation), and the run logs a warning when their
share of that step's checks exceeds `checker_warn_fraction`, and a summary at its end.
"""

from __future__ import annotations

import logging
from pathlib import Path

from grpo_dial.train import checkpoint
from grpo_dial.train.batch import UpdateResult
from grpo_dial.train.config import TrainConfig
from grpo_dial.train.resume import last_good
from grpo_dial.train.state import RunState

log = logging.getLogger("grpo_dial")

# verify_counts key -> per-step column; a crash is a checker process that died mid-check
CHECKER_COLUMNS = {
    "timeouts": "checker_timeouts",
    "errors": "checker_errors",
    "crashes": "checker_crashes",
    "bad_references": "checker_bad_references",
}


def check_step(
    run: RunState, result: UpdateResult, config: TrainConfig, step: int, path: Path
) -> None:
    """Stop the run (ValueError, one line) on non-finite weights after the update, or after
    max_nonfinite_steps consecutive non-finite steps; warn on each skipped step."""
    if not checkpoint.all_finite(run.model.parameters()):
        raise ValueError(
            f"stopping at step {step}: the update left non-finite weights; "
            f"{last_good(run, path)}"
        )
    if result.finite:
        run.nonfinite = 0
        return
    run.nonfinite += 1
    log.warning(
        "step %d: non-finite loss %s or gradient norm %s; update skipped (%d in a row, %d allowed)",
        step,
        result.loss,
        result.grad_norm,
        run.nonfinite,
        config.max_nonfinite_steps,
    )
    if run.nonfinite >= config.max_nonfinite_steps:
        raise ValueError(
            f"stopping at step {step}: {run.nonfinite} consecutive steps with a non-finite loss "
            f"or gradient (max_nonfinite_steps={config.max_nonfinite_steps}); "
            f"{last_good(run, path)}"
        )


def book_checker(run: RunState, task: object, config: TrainConfig, step: int) -> None:
    """Put the checker tallies since the last booking into the last step row; warn above the
    threshold."""
    counts = _counts(task)
    if not counts:
        return
    new = {k: counts.get(k, 0) - run.checker_seen.get(k, 0) for k in counts}
    run.checker_seen = counts
    row = run.records["steps"][-1]
    for key, column in CHECKER_COLUMNS.items():
        row[column] = [int(new.get(key, 0))]
    failed, checks = sum(new.get(k, 0) for k in CHECKER_COLUMNS), new.get("checks", 0)
    if checks and failed / checks > config.checker_warn_fraction:
        log.warning(
            "step %d: the answer checker failed on %d of %d checks (%s); those responses "
            "scored 0 (checker_warn_fraction=%g)",
            step,
            failed,
            checks,
            ", ".join(f"{k} {new.get(k, 0)}" for k in CHECKER_COLUMNS),
            config.checker_warn_fraction,
        )


def start_checker(run: RunState, task: object) -> None:
    """Take the verifier's tallies as already booked (a fresh or resumed process)."""
    run.checker_seen = _counts(task)


def summarize_checker(run: RunState, task: object) -> None:
    """One log line with the run's checker failures over every step row (tasks that count)."""
    rows = run.records["steps"]
    if not rows or not _counts(task):
        return
    totals = {c: sum(int(r.get(c, [0])[0]) for r in rows) for c in CHECKER_COLUMNS.values()}
    log.info(
        "answer checker over the run: %s",
        ", ".join(f"{k} {totals[c]}" for k, c in CHECKER_COLUMNS.items()),
    )


def _counts(task: object) -> dict[str, int]:
    counts = getattr(task, "verify_counts", None)
    return dict(counts()) if callable(counts) else {}

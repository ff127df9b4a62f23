"""Running a stage as a Snakemake job: progress and errors go to the rule's log file.

Every stage is `stage(input, output, params)` with plain mappings of names to paths and values, so
it runs the same from Snakemake (`run_rule`), from the CLI (`grpo-dial stage`), or from a test. No
stage holds logic that a library module could hold.
"""

from __future__ import annotations

import logging
import os
import sys
import time
import traceback
from collections.abc import Callable, Mapping
from pathlib import Path

log = logging.getLogger("grpo_dial")

ATTEMPT_MARKER = "===== attempt started"  # first line of each attempt in a job's log
ATTEMPTS_LOG = "attempts.log"  # every attempt of a resumable job, beside its checkpoint

Stage = Callable[[Mapping[str, str], Mapping[str, str], Mapping], None]


def run_rule(stage: Stage, smk) -> None:
    """Run `stage` for a Snakemake job: progress and errors go to the rule's log file.

    A `ValueError` (bad config, path or data row) is logged as one line; anything else with its
    traceback. Either way the job fails and Snakemake removes its partial outputs. Each attempt
    starts with an ATTEMPT_MARKER line. Snakemake deletes a job's log before rerunning it, so a
    resumable job (params `checkpoint_dir`) also appends to ATTEMPTS_LOG there, and its fresh log
    starts with the earlier attempts' lines: a killed attempt's log is never lost.
    """
    log_path = Path(smk.log[0]) if smk.log else None
    handlers: list[logging.Handler] = [logging.StreamHandler(sys.stderr)]
    if log_path is not None:
        stamp = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
        marker = f"{ATTEMPT_MARKER} {stamp} (pid {os.getpid()}) {'=' * 20}\n"
        paths = [log_path]
        checkpoint_dir = dict(smk.params.items()).get("checkpoint_dir")
        if checkpoint_dir is not None:
            history = Path(checkpoint_dir) / ATTEMPTS_LOG
            if history.exists() and not log_path.exists():
                log_path.parent.mkdir(parents=True, exist_ok=True)
                log_path.write_text(history.read_text(errors="replace"))
            paths.append(history)
        for path in paths:
            path.parent.mkdir(parents=True, exist_ok=True)
            with open(path, "a") as f:
                f.write(marker)
            handlers.append(logging.FileHandler(path, mode="a"))
    logging.basicConfig(
        level=logging.INFO,
        handlers=handlers,
        force=True,
        format="%(asctime)s %(levelname)s %(message)s",
    )
    try:
        params = {k: v for k, v in smk.params.items() if k != "code"}  # a rerun trigger only
        params.setdefault("threads", smk.threads)
        stage(dict(smk.input.items()), dict(smk.output.items()), params)
    except ValueError as error:
        log.error("%s: %s", stage.__name__, error)
        sys.exit(1)
    except Exception:
        log.error("%s failed:\n%s", stage.__name__, traceback.format_exc())
        sys.exit(1)

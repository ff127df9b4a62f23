"""Which job-status command a SLURM run uses, and why, in one line (docs/cluster.md).

The executor plugin learns a job's end from `sacct` or `squeue`; which one notices every end
depends on the plugin's version, the cluster's accounting and its MinJobAge, read from
`scontrol show config` (choose_status_command). Standard library only at DAG build; the CLI's
profile reader imports yaml inside.
"""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

# ------------------------------------------------------------------ the status command
# snakemake-executor-plugin-slurm learns a job's end from `sacct` or `squeue` (docs/cluster.md):
# - from 2.4.0 on it compares sacct's State exactly with its failure states, so a cancelled job
#   ('CANCELLED by <uid>' in sacct) counts as running and Snakemake waits for it forever;
#   squeue says 'CANCELLED' and works.
# - squeue forgets a job MinJobAge seconds after it ends, and the plugin waits up to 180 s
#   between queries when nothing finishes: MinJobAge must outlast that wait, else a job can end
#   and vanish unseen (and is waited for forever).
# - it queries sacct instead of squeue, silently, when MinJobAge is unknown or below
#   3 x slurm-init-seconds-before-status-checks and sacct is installed, even where sacct fails.
PLUGIN = "snakemake-executor-plugin-slurm"
EXACT_STATES_SINCE = (2, 4)  # first plugin version that reads 'CANCELLED by 0' as running
PLUGIN_LONGEST_WAIT = 180  # s between two status queries at most (the plugin's max_sleep_time)
WAIT_MARGIN = 60  # s: the query itself (up to 5 tries) and a busy scheduler on top of that wait
ADVISED_MIN_JOB_AGE = 300  # SLURM's default


@dataclass(frozen=True)
class SlurmConfig:
    accounting: bool | None  # AccountingStorageType is not accounting_storage/none; None: unknown
    min_job_age: int | None  # seconds a finished job stays in squeue; None: not given


@dataclass(frozen=True)
class StatusChoice:
    command: str  # "sacct" or "squeue"
    note: str  # one line: what was chosen and why
    fatal: bool = False  # the run would hang whatever the command: stop before submitting


def parse_scontrol_config(text: str) -> SlurmConfig:
    """AccountingStorageType and MinJobAge ('300 sec', '5 min', '1h') from
    `scontrol show config`."""
    storage = re.search(r"^AccountingStorageType\s*=\s*(\S+)", text, re.MULTILINE)
    age = re.search(r"^MinJobAge\s*=\s*(\d+)\s*([a-zA-Z]*)", text, re.MULTILINE)
    seconds = None
    if age is not None:
        unit = age.group(2).lower()
        scale = 3600 if unit.startswith("h") else 60 if unit.startswith("min") else 1
        seconds = int(age.group(1)) * scale
    return SlurmConfig(
        accounting=None if storage is None else storage.group(1) != "accounting_storage/none",
        min_job_age=seconds,
    )


def query_slurm_config() -> SlurmConfig | None:
    """This cluster's accounting mode and MinJobAge; None when scontrol is missing or fails."""
    try:
        out = subprocess.run(
            ["scontrol", "show", "config"], capture_output=True, text=True, timeout=30, check=True
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    return parse_scontrol_config(out)


def plugin_version() -> tuple[int, ...] | None:
    """The installed executor plugin's version as numbers, e.g. (2, 8, 0); None if unknown."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return tuple(int(part) for part in re.findall(r"\d+", version(PLUGIN))[:3])
    except PackageNotFoundError:
        return None


def squeue_min_job_age(init_seconds: int) -> int:
    """The least MinJobAge that squeue status survives: the plugin's longest wait between
    queries plus a margin, and at least its own fallback threshold 3 x init_seconds."""
    return max(PLUGIN_LONGEST_WAIT + WAIT_MARGIN, 3 * init_seconds)


def choose_status_command(
    config: SlurmConfig | None,
    init_seconds: int,
    requested: str | None,
    sacct_installed: bool,
    plugin: tuple[int, ...] | None,
) -> StatusChoice:
    """The status command that notices every end of a job here, or the least bad one, and why.
    `requested`: the profile's slurm-status-command (the plugin's default is sacct where it is
    installed); `plugin`: its version (None: assume the newest, which compares states exactly)."""
    exact = plugin is None or plugin >= EXACT_STATES_SINCE
    name = f"{PLUGIN} {'.'.join(map(str, plugin))}" if plugin else PLUGIN
    lost_cancel = (
        f"a cancelled job then goes unnoticed and Snakemake waits for it forever "
        f"({name} reads sacct's 'CANCELLED by <uid>' as running)"
    )
    if config is None:  # scontrol failed: the plugin finds no MinJobAge either
        if not sacct_installed:
            return StatusChoice(
                "squeue",
                "job status from squeue (no sacct here); scontrol "
                "show config failed, so MinJobAge is unknown",
            )
        return StatusChoice(
            "sacct",
            "job status from sacct: scontrol show config failed, so "
            "MinJobAge is unknown and the plugin uses sacct"
            + (f"; {lost_cancel}" if exact else ""),
        )
    needed = squeue_min_job_age(init_seconds)
    age = (
        "MinJobAge (not in scontrol show config)"
        if config.min_job_age is None
        else f"MinJobAge={config.min_job_age} s"
    )
    fix = f"set MinJobAge={max(ADVISED_MIN_JOB_AGE, needed)} in slurm.conf"
    squeue_ok = config.min_job_age is not None and config.min_job_age >= needed
    kept = (
        f"{age} keeps a finished job in squeue past the plugin's longest wait between "
        f"queries ({PLUGIN_LONGEST_WAIT} s)"
    )
    if config.accounting is False or not sacct_installed:
        why = "no accounting (sacct is disabled)" if config.accounting is False else "no sacct"
        if squeue_ok:
            return StatusChoice(
                "squeue", f"job status from squeue, as this cluster has {why}; {kept}"
            )
        plugin_falls_back = sacct_installed and (
            config.min_job_age is None or config.min_job_age < 3 * init_seconds
        )
        if plugin_falls_back:
            return StatusChoice(
                "squeue",
                (
                    f"this cluster has {why} and {age} is below {3 * init_seconds} s "
                    f"(3 x slurm-init-seconds-before-status-checks), so the executor plugin "
                    f"queries sacct instead of squeue, which fails here and loses every job: "
                    f"{fix}"
                ),
                fatal=True,
            )
        return StatusChoice(
            "squeue",
            (
                f"job status from squeue, as this cluster has {why}, but {age} is below "
                f"{needed} s: a job that ends while the plugin waits up to "
                f"{PLUGIN_LONGEST_WAIT} s between queries can leave squeue unseen, and "
                f"Snakemake waits for it forever; {fix}"
            ),
        )
    if squeue_ok and (exact or requested == "squeue"):
        because = (
            f"; not sacct, because {name} reads its 'CANCELLED by <uid>' as running"
            if exact
            else ""
        )
        return StatusChoice("squeue", f"job status from squeue: {kept}{because}")
    if squeue_ok:  # a plugin before 2.4 reads sacct's states right: as the profile asks
        return StatusChoice(
            "sacct",
            f"job status from sacct, as the profile asks ({name} "
            f"reads 'CANCELLED by <uid>' as CANCELLED)",
        )
    return StatusChoice(
        "sacct",
        (
            f"job status from sacct: {age} is too low for squeue (needs >= {needed} s: the plugin "
            f"waits up to {PLUGIN_LONGEST_WAIT} s between queries)"
            + (f"; {lost_cancel}: {fix}" if exact else "")
        ),
    )


def status_settings(settings) -> tuple[int, str | None]:
    """(slurm-init-seconds-before-status-checks, slurm-status-command) of the executor settings;
    the plugin's defaults (40 s; sacct where installed) when unset."""
    init = getattr(settings, "init_seconds_before_status_checks", None) or 40
    return int(init), getattr(settings, "status_command", None)


def profile_status_settings(profile: Path) -> tuple[int, str | None]:
    """(slurm-init-seconds-before-status-checks, slurm-status-command) of a profile directory's
    config.yaml; 40 s (the plugin's default) and None when unset."""
    import yaml  # a Snakemake dependency; only the CLI needs it

    path = profile / "config.yaml"
    spec = (yaml.safe_load(path.read_text()) if path.exists() else None) or {}
    init = spec.get("slurm-init-seconds-before-status-checks") or 40
    return int(init), spec.get("slurm-status-command")



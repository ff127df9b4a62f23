"""The manifest's probes and its writer: what ran a run (git state, Python and package versions,
machine, start and end), joined to what it was asked (grpo_dial.dag.provenance).

Every probe answers "unknown" (or None for a package that is not installed) rather than fail: a
run outside a git checkout, without git, or without a package still writes its manifest.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path

from grpo_dial.dag.provenance import STARTED, UNKNOWN, assemble

PACKAGES = ("grpo-dial", "snakemake", "torch", "transformers", "datasets", "pandas", "numpy",
            "seaborn", "pyyaml", "trl")  # fmt: skip
_HERE = Path(__file__).resolve()  # <checkout>/src/grpo_dial/stages/manifest.py, or installed
# the checkout whose src/ this module was read from; None for an installed (non-editable) copy
SOURCE = _HERE.parents[3] if _HERE.parents[2].name == "src" else None


def now() -> str:
    """The time now, UTC, to the second (ISO 8601)."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def git_state(path: str | Path | None) -> dict:
    """The commit checked out at `path` and whether tracked files differ from it (`dirty`);
    UNKNOWN for both outside a git checkout, without git, or without a path."""
    if path is None:
        return {"commit": UNKNOWN, "dirty": UNKNOWN}

    def git(*args: str) -> str | None:
        try:
            done = subprocess.run(["git", "-C", str(path), *args], capture_output=True,
                                  text=True, timeout=30, check=False)  # fmt: skip
        except (OSError, subprocess.SubprocessError):
            return None
        return done.stdout if done.returncode == 0 else None

    commit = git("rev-parse", "HEAD")
    if commit is None:
        return {"commit": UNKNOWN, "dirty": UNKNOWN}
    status = git("status", "--porcelain", "--untracked-files=no")
    return {"commit": commit.strip(), "dirty": UNKNOWN if status is None else bool(status.strip())}


def package_versions(names: tuple[str, ...] = PACKAGES) -> dict:
    """Python's version, then each package's installed version (importlib.metadata), None for
    one that is not installed."""
    from importlib import metadata

    versions: dict[str, str | None] = {"python": platform.python_version()}
    for name in names:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    return versions


def machine() -> dict:
    """The platform string, the processor architecture and the CPU count."""
    return {"platform": platform.platform(), "machine": platform.machine(),
            "cpu_count": os.cpu_count(), "python_executable": sys.executable}  # fmt: skip


def build_manifest(record: Mapping, started: str | None = None) -> dict:
    """The manifest of `record` (dag.provenance.run_record, or a command's arguments in its
    keys): the git state of this checkout (SOURCE), packages, machine; started at `started`,
    else $GRPO_DIAL_STARTED when set (the DAG build), else now; ended now."""
    ended = now()
    started = started or os.environ.get(STARTED) or ended
    return assemble(record, git_state(SOURCE), package_versions(), machine(), started, ended)


def write_manifest(manifest: Mapping, path: str | Path) -> None:
    """The manifest as indented JSON (a value JSON cannot hold is written as its text)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(manifest, indent=2, default=str) + "\n")

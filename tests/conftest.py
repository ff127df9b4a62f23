"""Shared fixtures (the repository, the read-only real data, a tiny saved policy, one smoke run per
session) and how the suite is spread over pytest-xdist workers (docs/development.md#tests)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml
from filelock import FileLock

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = (REPO / ".." / "shared" / "data").resolve()
SMOKE_CORES = 2  # the smoke run's --cores: slurm_small's warm_start cpus_per_task (tests/cluster)

# The longest-running test modules or tests (a --durations run, docs/development.md#tests), longest
# first. Under xdist they are handed out before everything else, so that no worker starts a long
# test when the others are nearly done. One missing here only starts later; nothing is skipped.
SLOW_FIRST = (
    "tests/cluster/test_slurm.py",  # CI: the smoke chain through sbatch, a cancel and resume
    "tests/workflow/test_policy_workflow.py",  # the smoke_run fixture
    "tests/workflow/test_trl_workflow.py",
    "tests/workflow/test_kill_resume.py",
    "tests/workflow/test_workflow.py::test_analysis_rules_end_to_end",
    "tests/workflow/test_external_workflow.py",
    "tests/tools/test_check_docs.py",  # the seeded stages of the embedded default (slow test)
    "tests/policy/test_warm_start.py",
    "tests/workflow/test_local_base.py",
    "tests/backends/test_trl_processes.py",
    "tests/workflow/test_real_model_smoke.py",
    "tests/policy/test_convert.py",
    "tests/policy/test_memory.py",
    "tests/passrates/test_estimate.py",
    "tests/tools/test_device_check.py",
    "tests/workflow/test_workflow.py",
    "tests/workflow/test_gpu_workflow.py",
    "tests/workflow/test_trl_gpu_dry_run.py",
    "tests/cluster/test_cluster_check.py",
)


def slow_rank(nodeid: str) -> int:
    """The place of a test in SLOW_FIRST (its own entry, else its module's), or after them all."""
    path, _, name = nodeid.partition("::")
    test = f"{path}::{name.split('[')[0]}"
    for i, entry in enumerate(SLOW_FIRST):
        if entry in (test, path):
            return i
    return len(SLOW_FIRST)


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """../shared/data beside the repository; tests that need it skip when it is absent."""
    if not SHARED_DATA.exists():
        pytest.skip(f"real data folder not found: {SHARED_DATA}")
    return SHARED_DATA


@pytest.fixture(scope="module")
def base_dir(tmp_path_factory):
    """A saved tiny policy (_rl_fixtures.save_tiny) for the trainer-level tests, once per module."""
    from _rl_fixtures import save_tiny

    return save_tiny(tmp_path_factory.mktemp("base"))


@dataclass(frozen=True)
class SmokeRun:
    """config/smoke.yaml run once: its working directory, config file, results and exit."""

    workdir: Path
    config_path: Path
    results: Path
    returncode: int
    stderr: str

    @property
    def config(self) -> dict:
        """A fresh copy of the merged-in overlay (smoke.yaml with this run's results_dir)."""
        return yaml.safe_load(self.config_path.read_text())


def session_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder of this test session shared by all its xdist workers (each worker's base temp
    folder sits inside the run's one)."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


@pytest.fixture(scope="session")
def smoke_run(tmp_path_factory) -> SmokeRun:
    """The whole smoke chain (config/smoke.yaml: warm start, pass rates, three arms, analyses)
    run once per test session, whichever worker asks first; the others wait on a file lock and
    read the same folder. Tests read it and may add files beside it (a report), never change it.
    --cores SMOKE_CORES (the slurm_small profile's warm_start CPUs), one BLAS thread."""
    root = session_root(tmp_path_factory)
    workdir = root / "smoke_run"
    record = root / "smoke_run.json"
    with FileLock(str(root / "smoke_run.lock")):
        if not record.exists():
            workdir.mkdir()
            config = yaml.safe_load((REPO / "config" / "smoke.yaml").read_text())
            config["results_dir"] = str(workdir / "results")
            (workdir / "config.yaml").write_text(yaml.safe_dump(config))
            env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
            env["PYTHONPATH"] = os.pathsep.join([str(REPO / "src"), env.get("PYTHONPATH", "")])
            done = subprocess.run(
                [sys.executable, "-m", "snakemake", "--snakefile", str(REPO / "Snakefile"),
                 "--directory", str(workdir), "--configfile", str(workdir / "config.yaml"),
                 "--cores", str(SMOKE_CORES)],
                capture_output=True, text=True, timeout=1800, env=env,
            )  # fmt: skip
            record.write_text(json.dumps({"returncode": done.returncode, "stderr": done.stderr}))
    done = json.loads(record.read_text())
    return SmokeRun(workdir, workdir / "config.yaml", workdir / "results", done["returncode"],
                    done["stderr"])  # fmt: skip


# How `pytest -n N --dist loadgroup` hands tests to workers (pytest_xdist_make_scheduler below):
# one test module is one unit of work, so a module's fixtures are built once; these modules'
# tests are independent (no module fixture) and long, so each test is a unit of its own:
SPLIT_BY_TEST = ("tests/workflow/test_workflow.py",)
# and these modules are one unit together (the SmolLM2 conversion, ~25 s, once per process):
SHARED_UNITS = {
    "tests/policy/test_convert.py": "smollm",
    "tests/workflow/test_real_model_smoke.py": "smollm",
}


def work_unit(nodeid: str) -> str:
    """The unit of work of a test id: its module, its module's group, or itself."""
    path = nodeid.split("::", 1)[0]
    return nodeid if path in SPLIT_BY_TEST else SHARED_UNITS.get(path, path)


@pytest.hookimpl(optionalhook=True)  # a pytest-xdist hook; without xdist it is never called
def pytest_xdist_make_scheduler(config: pytest.Config, log):
    """`--dist loadgroup`: xdist's scope scheduler over work_unit, in collection order (the slow
    modules first; pytest_collection_modifyitems). xdist's own loadgroup reads an `@group`
    suffix of the node id that pytest 9.2 no longer keeps, hence this one."""
    if config.getoption("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class WorkUnits(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return work_unit(nodeid)

    config.option.loadscopereorder = False  # keep the slow-first order
    return WorkUnits(config, log)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under xdist, the slow modules first (a stable sort, after pytest-randomly's shuffle, which
    is a wrapper): a worker then never starts a long test when the others are nearly done.
    Without xdist the order is left alone."""
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        return
    items.sort(key=lambda item: slow_rank(item.nodeid))  # stable: the shuffle stays within

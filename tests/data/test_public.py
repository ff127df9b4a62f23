"""Public data files: checksums, the mirror, and downloads over file:// URLs (never the network)."""

from __future__ import annotations

import hashlib
import logging
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from conftest import REPO

from grpo_dial.data.public import (
    check_entry,
    fetch,
    locate,
    mirror_folder,
    sha256_of,
    unsafe_output_dir,
    verify,
)

PAYLOAD = b"step,allcorrect_fraction\n0,0.1\n100,0.4\n" * 1000
SHA = hashlib.sha256(PAYLOAD).hexdigest()


@pytest.fixture
def origin(tmp_path: Path) -> Path:
    path = tmp_path / "origin" / "curve.csv"
    path.parent.mkdir()
    path.write_bytes(PAYLOAD)
    return path


def test_fetch_writes_the_file_atomically_with_progress(origin, tmp_path, caplog) -> None:
    target = tmp_path / "resources" / "dapo" / "curve.csv"
    with caplog.at_level(logging.INFO, logger="grpo_dial"):
        fetch(origin.as_uri(), target, SHA)
    assert target.read_bytes() == PAYLOAD and sha256_of(target) == SHA
    assert "100%" in caplog.text and "downloaded" in caplog.text
    assert sorted(p.name for p in target.parent.iterdir()) == ["curve.csv"]  # no temp file left


@pytest.mark.parametrize("case", ["checksum", "missing", "unreachable"])
def test_a_failed_fetch_is_one_line_and_leaves_nothing(origin, tmp_path, case) -> None:
    target = tmp_path / "resources" / "curve.csv"
    url = {
        "checksum": origin.as_uri(),
        "missing": (tmp_path / "nowhere.csv").as_uri(),
        "unreachable": "http://127.0.0.1:9/curve.csv",  # discard port: refused at once
    }[case]
    sha = "0" * 64 if case == "checksum" else SHA
    with pytest.raises(ValueError) as err:
        fetch(url, target, sha, timeout=5, retries=0)
    text = str(err.value)
    assert "\n" not in text and url in text
    assert ("checksum mismatch" in text) is (case == "checksum")
    assert not target.parent.exists() or list(target.parent.iterdir()) == []


def test_a_failed_fetch_keeps_an_earlier_good_copy(origin, tmp_path) -> None:
    target = tmp_path / "curve.csv"
    fetch(origin.as_uri(), target, SHA)
    with pytest.raises(ValueError, match="checksum mismatch"):
        fetch(origin.as_uri(), target, "f" * 64)
    assert target.read_bytes() == PAYLOAD


def test_locate_prefers_the_mirror_and_checks_it(origin, tmp_path) -> None:
    entries = {"curve": {"file": "curve.csv", "url": "file:///x", "sha256": SHA, "license": "MIT"}}
    resources = tmp_path / "resources"
    assert locate("curve", entries, origin.parent, resources) == (origin, False)
    assert locate("curve", entries, None, resources) == (resources / "curve.csv", True)
    with pytest.raises(ValueError, match="not in data_mirror"):
        locate("curve", entries, tmp_path, resources)
    # data_mirror: auto may hold only some files: the others are downloaded
    assert locate("curve", entries, tmp_path, resources, True) == (resources / "curve.csv", True)
    assert locate("curve", entries, origin.parent, resources, True) == (origin, False)
    with pytest.raises(ValueError, match="unknown public file 'other'"):
        locate("other", entries, None, resources)
    bad = {"curve": {**entries["curve"], "sha256": "a" * 64}}
    with pytest.raises(ValueError) as err:
        locate("curve", bad, origin.parent, resources)
    assert str(err.value).startswith("checksum mismatch for public file 'curve' (data_mirror)")
    with pytest.raises(ValueError, match="expected a{64}"):
        verify(origin, "a" * 64, "x")
    (resources / "curve.csv").parent.mkdir()
    (resources / "curve.csv").write_bytes(PAYLOAD)
    assert locate("curve", entries, None, resources) == (resources / "curve.csv", False)
    (resources / "curve.csv").write_bytes(b"edited")
    with pytest.raises(ValueError, match="checksum mismatch for public file 'curve' \\(delete it"):
        locate("curve", entries, None, resources)


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ({"file": "/abs.csv", "url": "https://x", "sha256": SHA}, "relative path"),
        ({"file": "../up.csv", "url": "https://x", "sha256": SHA}, "relative path"),
        ({"file": "a.csv", "url": "ftp://x", "sha256": SHA}, "https://, http:// or file://"),
        ({"file": "a.csv", "url": "https://x", "sha256": "abc"}, "64 lowercase hex"),
    ],
)
def test_bad_entries(entry: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        check_entry("x", entry)


def test_the_default_config_pins_every_mirrored_file(shared_data: Path) -> None:
    """Each public file of config/config.yaml is the mirror's file, byte for byte, at a pinned
    commit (40 hex digits in its raw URL), with a license."""
    entries = yaml.safe_load((REPO / "config" / "config.yaml").read_text())["public_data"]
    assert set(entries) == {
        "gsm8k_solutions", "gsm8k_train", "gsm8k_test", "math500", "math_cot_100", "dapo_fig3b",
    }  # fmt: skip
    for name, entry in entries.items():
        check_entry(name, entry)
        assert sha256_of(shared_data / entry["file"]) == entry["sha256"], name
        commit = entry["url"].split("/")[5]
        assert entry["url"].startswith("https://raw.githubusercontent.com/"), name
        assert len(commit) == 40 and int(commit, 16) >= 0, name
        assert entry["url"].endswith("/" + Path(entry["file"]).name) and entry["license"]


def test_importable_without_heavy_packages() -> None:
    code = (
        "import sys, grpo_dial.data.public; "
        "print(sorted(m for m in ('torch', 'pandas', 'numpy') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_what_the_workflow_imports_at_parse_time_has_no_torch_scipy_or_pandas() -> None:
    """The rule files import these at parse time (the DAG plan, the config's checks, the
    cluster fit, the TRL backend's translation, the aware sweep's grid): none may pull in torch,
    scipy or pandas, which every `snakemake` call (each dry run of the tests) would then load
    (scipy.stats alone: about a second of CPU per call)."""
    rules = "".join(p.read_text() for p in sorted((REPO / "workflow" / "rules").glob("*.smk")))
    imported = sorted(set(re.findall(r"from (grpo_dial[\w.]+) import", rules)))
    assert imported == [
        "grpo_dial.analysis.aware.grid",
        "grpo_dial.backends.trl.launch",
        "grpo_dial.dag",
        "grpo_dial.dag.inputs",
        "grpo_dial.dag.plan",
        "grpo_dial.dag.provenance",
        "grpo_dial.dag.resources",
        "grpo_dial.data.sources",
        "grpo_dial.stages.fingerprint",
        "grpo_dial.tools.cluster_check",
    ]  # fmt: skip  (dag.plan imports dag.schema, dag.config_checks, backends.trl.config;
    # aware.smk reads the sweep's levels and optimizers from analysis.aware.grid)
    heavy = ("torch", "scipy", "pandas")
    code = f"import sys, {', '.join(imported)}; print([m for m in {heavy} if m in sys.modules])"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ("results", None),
        ("/elsewhere/results", None),
        ("", "must not be empty"),
        (".", "'.' is the working directory or a folder above it"),
        ("..", "is the working directory or a folder above it"),
        ("{repo}", "is the repository or a folder above it"),
        ("{repo}/..", "or a folder above it"),
        ("{repo}/src/grpo_dial/out", "inside the repository's src/"),
        ("{repo}/workflow", "inside the repository's workflow/"),
    ],
)
def test_unsafe_output_dirs(tmp_path, value: str, problem: str | None) -> None:
    repo, workdir = tmp_path / "repo", tmp_path / "work"
    got = unsafe_output_dir(value.format(repo=repo), repo, workdir)
    assert got == problem if problem is None else problem in got


def test_mirror_folder(tmp_path) -> None:
    repo = tmp_path / "project"
    assert mirror_folder(None, repo) is None and mirror_folder("null", repo) is None
    assert mirror_folder("auto", repo) is None  # nothing beside the repository
    (tmp_path / "shared" / "data").mkdir(parents=True)
    assert mirror_folder("auto", repo) == tmp_path / "shared" / "data"
    assert mirror_folder(str(tmp_path), repo) == tmp_path
    with pytest.raises(ValueError, match="folder not found: /no/such"):
        mirror_folder("/no/such", repo)


def test_network_errors_are_retried_then_one_line(tmp_path, monkeypatch) -> None:
    from grpo_dial.data import public

    waits = []
    monkeypatch.setattr(public.time, "sleep", waits.append)
    with pytest.raises(ValueError, match="^could not download http://127.0.0.1:9/x: ") as err:
        fetch("http://127.0.0.1:9/x", tmp_path / "x", SHA, timeout=5, retries=2)
    assert waits == [2, 4] and "\n" not in str(err.value)


def test_public_names_in_task_specs_become_paths(shared_data) -> None:
    """What a script outside Snakemake does with config/gpu.yaml's math task."""
    from grpo_dial.data.public import with_public_paths

    config = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    gpu = yaml.safe_load((REPO / "config" / "gpu.yaml").read_text())
    task = with_public_paths(gpu["task"], {**config, "data_mirror": str(shared_data)}, REPO)
    train = task["options"]["train"]
    assert train[0]["path"] == str(shared_data / "gsm8k" / "train.jsonl")
    assert "public" not in train[0] and train[0]["n"] == 512
    offline = with_public_paths(gpu["task"], {**config, "data_mirror": None}, REPO)
    assert offline["options"]["heldout"][1]["path"] == "resources/math500/test.jsonl"

"""The run's provenance: results/manifest.json and the first lines of summary.md (rule `summary`),
and the probes behind them (stages.manifest, dag.provenance)."""

from __future__ import annotations

import json
import shutil
import subprocess
from importlib import metadata
from pathlib import Path

import pytest
import yaml

from grpo_dial.dag.provenance import STARTED, run_record, settings_changes, sha256
from grpo_dial.dag.schema import config_error, read_schema
from grpo_dial.stages import manifest as m
from grpo_dial.stages.summary import summary_markdown

REPO = Path(__file__).resolve().parents[2]
DEFAULT = REPO / "config" / "config.yaml"
HEADER_LINES = 8  # title, blank, five provenance bullets, blank


def _config(**changes: dict) -> dict:
    """The embedded default, updated section by section, with the schema's defaults filled."""
    config = yaml.safe_load(DEFAULT.read_text())
    for section, values in changes.items():
        config[section].update(values)
    assert config_error(config, read_schema(REPO / "workflow/schemas/config.schema.yaml")) is None
    return config


def _summary(tmp_path: Path, record: dict | None, name: str = "results") -> tuple[str, Path]:
    results = tmp_path / name
    results.mkdir(exist_ok=True)  # as Snakemake makes an output's folder
    params = {} if record is None else {"provenance": record}
    summary_markdown({}, {"summary": str(results / "summary.md"),
                          "manifest": str(results / "manifest.json")}, params)  # fmt: skip
    return (results / "summary.md").read_text(), results / "manifest.json"


def _git(repo: Path, *args: str) -> None:
    options = ["-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false"]
    subprocess.run(["git", "-C", str(repo), *options, *args], check=True, capture_output=True)


def test_default_and_changed_configs_never_share_a_header(tmp_path):
    """(a) the default config names its file and no changed setting; (b) window_fraction 0.2
    names that setting; the two headers differ and the sections below them do not."""
    default = run_record(_config(), [str(DEFAULT)], {}, REPO)
    changed = run_record(_config(decompose={"window_fraction": 0.2}), [str(DEFAULT)], {}, REPO)
    first, _ = _summary(tmp_path, default, "a")
    second, _ = _summary(tmp_path, changed, "b")
    head_a, head_b = first.splitlines()[:HEADER_LINES], second.splitlines()[:HEADER_LINES]
    assert head_a[0] == "# grpo-dial: summary of this run"
    assert head_a[2] == "- Config files: `config/config.yaml`"
    assert head_a[4] == "- Settings that differ from the default: none"
    assert head_b[4] == "- Settings that differ from the default: `decompose.window_fraction: 0.2`"
    assert head_a[3].startswith("- Commit: `") and head_a[-1] == ""
    assert head_a != head_b
    assert first.splitlines()[HEADER_LINES:] == second.splitlines()[HEADER_LINES:]


def test_the_sections_under_the_header_are_those_without_provenance(tmp_path):
    with_record, _ = _summary(tmp_path, run_record(_config(), [str(DEFAULT)], {}, REPO), "a")
    without, manifest = _summary(tmp_path, None, "b")
    lines = with_record.splitlines()
    assert lines[:2] + lines[HEADER_LINES:] == without.splitlines()
    assert not manifest.exists()  # no provenance handed over, no manifest written


def test_overlays_and_command_line_values_are_named_in_merge_order(tmp_path):
    overlay = tmp_path / "window.yaml"
    overlay.write_text("decompose: {window_fraction: 0.2}\n")
    record = run_record(_config(decompose={"window_fraction": 0.2}),
                        [str(overlay), str(DEFAULT)], {"seed": 3}, REPO, [overlay])  # fmt: skip
    assert [f["path"] for f in record["config_files"]] == ["config/config.yaml", str(overlay)]
    assert [f["overlay"] for f in record["config_files"]] == [False, True]
    assert record["config_files"][1]["sha256"] == sha256(overlay)
    text, _ = _summary(tmp_path, record)
    assert text.splitlines()[2] == (f"- Config files: `config/config.yaml`, `{overlay}` (overlay), "
                                    "--config `seed=3`")  # fmt: skip


def test_settings_changes_name_added_changed_and_removed_keys():
    default = {"a": {"b": 1, "c": [1, 2]}, "d": True, "e": "x"}
    config = {"a": {"b": 2, "c": [1, 2]}, "d": False, "f": None}
    assert settings_changes(config, default) == ["a.b: 2", "d: false", "f: null", "e: (absent)"]
    assert settings_changes(default, default) == []


def test_a_dirty_tree_says_dirty(tmp_path, monkeypatch):
    """(c) a checkout whose tracked files differ from its commit: the manifest says dirty and so
    does the summary's commit line."""
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    repo = tmp_path / "checkout"
    repo.mkdir()
    (repo / "file.txt").write_text("one\n")
    _git(repo, "init", "-q")
    _git(repo, "add", "file.txt")
    _git(repo, "commit", "-q", "-m", "first")
    commit = subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], check=True,
                            capture_output=True, text=True).stdout.strip()  # fmt: skip
    assert m.git_state(repo) == {"commit": commit, "dirty": False}
    (repo / "file.txt").write_text("two\n")
    monkeypatch.setattr(m, "SOURCE", repo)
    text, manifest = _summary(tmp_path, run_record(_config(), [str(DEFAULT)], {}, REPO))
    assert json.loads(manifest.read_text())["git"] == {"commit": commit, "dirty": True}
    assert text.splitlines()[3] == f"- Commit: `{commit}` (dirty)"


def test_outside_git_or_without_git_the_commit_is_unknown(tmp_path, monkeypatch):
    """(d) no git checkout, or no git at all: "unknown", and the summary is still written."""
    outside = tmp_path / "plain"
    outside.mkdir()
    assert m.git_state(outside) == {"commit": "unknown", "dirty": "unknown"}
    assert m.git_state(None) == {"commit": "unknown", "dirty": "unknown"}  # an installed copy
    monkeypatch.setattr(m, "SOURCE", outside)
    text, manifest = _summary(tmp_path, run_record(_config(), [str(DEFAULT)], {}, REPO))
    assert text.splitlines()[3] == "- Commit: `unknown`"
    monkeypatch.setenv("PATH", str(outside))  # no git on the PATH
    assert m.git_state(REPO) == {"commit": "unknown", "dirty": "unknown"}


def test_the_manifest_holds_config_files_versions_machine_and_times(tmp_path, monkeypatch):
    monkeypatch.setenv(STARTED, "2026-01-01T00:00:00Z")
    config = _config()
    _, path = _summary(tmp_path, run_record(config, [str(DEFAULT)], {}, REPO))
    manifest = json.loads(path.read_text())
    assert list(manifest) == ["config", "config_files", "overrides", "changes", "git",
                              "packages", "machine", "started", "ended"]  # fmt: skip
    assert manifest["config"] == json.loads(json.dumps(config, default=str))
    assert manifest["config_files"] == [{"path": "config/config.yaml", "sha256": sha256(DEFAULT),
                                         "overlay": False}]  # fmt: skip
    for name in m.PACKAGES:
        try:
            expected = metadata.version(name)
        except metadata.PackageNotFoundError:
            expected = None
        assert manifest["packages"][name] == expected, name
    assert manifest["packages"]["snakemake"] is not None
    assert manifest["machine"]["cpu_count"] >= 1 and manifest["machine"]["platform"]
    assert manifest["started"] == "2026-01-01T00:00:00Z" <= manifest["ended"]


def test_the_same_config_gives_the_same_record_and_a_changed_one_another():
    """The record is the summary rule's params: equal for an unchanged config (no rerun), and
    different once a setting changes (Snakemake reruns the summary and rewrites the manifest)."""
    same = run_record(_config(), [str(DEFAULT)], {}, REPO)
    assert repr(same) == repr(run_record(_config(), [str(DEFAULT)], {}, REPO))
    changed = run_record(_config(decompose={"window_fraction": 0.2}), [str(DEFAULT)], {}, REPO)
    assert repr(changed) != repr(same)
    assert set(same) == {"config", "config_files", "overrides", "changes"}  # no clock, no git


def test_the_report_caption_of_the_summary_names_config_files_and_changed_settings():
    """workflow/report/summary.rst, rendered as `snakemake --report` renders a caption (Jinja2
    over the job's params, then reStructuredText)."""
    import jinja2
    from docutils.core import publish_parts
    from snakemake.iocontainers import Params

    caption = (REPO / "workflow" / "report" / "summary.rst").read_text()
    record = run_record(_config(decompose={"window_fraction": 0.2}), [str(DEFAULT)], {}, REPO)
    params = Params(fromdict={"provenance": record})
    text = jinja2.Environment().from_string(caption).render(snakemake=Params(fromdict={
        "params": params}))  # fmt: skip
    html = publish_parts(text, writer="html")["body"]
    assert '<tt class="docutils literal">config/config.yaml</tt>;' in html
    assert "default: <tt class=\"docutils literal\">decompose.window_fraction: 0.2</tt>." in html

"""A run's provenance: what the run was asked (its config and the files it came from) and what ran
it (commit, packages, machine, start and end), as one plain mapping, the manifest.

At DAG build `run_record` gathers the part that decides the results (merged config, config files
with their sha256, the command line's `--config` values, the settings that differ from the
embedded default): the rule's params carry it, so a changed config reruns the rule that writes
the manifest and an unchanged one does not. The probes of what ran (git, package versions,
machine) and the clock are read when the manifest is written (grpo_dial.stages.manifest), never
at DAG build, so they never rerun a job. `assemble` and `header_lines` are pure.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from pathlib import Path

DEFAULT_CONFIG = Path("config") / "config.yaml"  # the Snakefile's embedded default, under the repo
MANIFEST = "manifest.json"  # its name beside the results it describes
STARTED = "GRPO_DIAL_STARTED"  # the run's start, set once at DAG build; every job inherits it
UNKNOWN = "unknown"


def sha256(path: str | Path) -> str:
    """The file's sha256 in hex, or UNKNOWN when it cannot be read."""
    try:
        return hashlib.sha256(Path(path).read_bytes()).hexdigest()
    except OSError:
        return UNKNOWN


def shown_path(path: str | Path, repo: str | Path) -> str:
    """The path relative to the repository when inside it (POSIX separators), else as given."""
    try:
        return Path(path).resolve().relative_to(Path(repo).resolve()).as_posix()
    except ValueError:
        return str(path)


def config_sources(
    configfiles: Iterable[str | Path], repo: str | Path, overlays: Iterable[str | Path] = ()
) -> list[dict]:
    """Each config file in the order it was merged: its shown path, sha256 and whether it is an
    overlay (one of `overlays`, the command line's --configfile files). Snakemake lists those
    first and the Snakefile's `configfile:` last, though the latter is merged first: the files
    that are no overlay come first, then the overlays in their order."""
    extra = [Path(p) for p in overlays]
    given = {p.resolve() for p in extra}
    files = [Path(p) for p in configfiles if Path(p).resolve() not in given]
    return [{"path": shown_path(p, repo), "sha256": sha256(p), "overlay": overlay}
            for overlay, group in ((False, files), (True, extra)) for p in group]  # fmt: skip


def flatten(values: Mapping, prefix: str = "") -> dict[str, object]:
    """Nested mappings as one level of dotted keys; lists and scalars are leaves."""
    flat: dict[str, object] = {}
    for key, value in values.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping) and value:
            flat |= flatten(value, f"{name}.")
        else:
            flat[name] = value
    return flat


def settings_changes(config: Mapping, default: Mapping) -> list[str]:
    """`key.path: value` for every setting of `config` that differs from `default` (both with the
    schema's defaults filled), in the config's order; a setting only the default has reads
    `key.path: (absent)`."""
    ours, base = flatten(config), flatten(default)
    changes = [f"{key}: {_value(value)}" for key, value in ours.items()
               if key not in base or base[key] != value]  # fmt: skip
    return changes + [f"{key}: (absent)" for key in base if key not in ours]


def _value(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return str(value).lower()
    return str(value)


def default_config(repo: str | Path) -> dict:
    """The embedded default config/config.yaml with the schema's defaults filled, as the DAG
    build fills a run's config; {} when the repository has none."""
    import yaml

    from grpo_dial.dag.plan import SCHEMA
    from grpo_dial.dag.schema import config_error, read_schema

    path = Path(repo) / DEFAULT_CONFIG
    if not path.is_file():
        return {}
    default = yaml.safe_load(path.read_text()) or {}
    config_error(default, read_schema(Path(repo) / SCHEMA))  # drops null dials, fills defaults
    return default


def run_record(
    config: Mapping,
    configfiles: Iterable[str | Path],
    overrides: Mapping,
    repo: str | Path,
    overlays: Iterable[str | Path] = (),
) -> dict:
    """What decides a pipeline run's results, in plain values: the merged config (defaults
    filled), its config files (`overlays` those of the command line), the command line's
    `--config` values and the settings that differ from the embedded default."""
    plain = _plain(config)
    return {
        "config": plain,
        "config_files": config_sources(configfiles, repo, overlays),
        "overrides": _plain(overrides),
        "changes": settings_changes(plain, default_config(repo)),
    }


def _plain(value: object) -> object:
    """Mappings as dicts and sequences as lists, all the way down (JSON- and pickle-safe)."""
    if isinstance(value, Mapping):
        return {str(key): _plain(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(item) for item in value]
    return value


def assemble(
    record: Mapping, git: Mapping, packages: Mapping, machine: Mapping, started: str, ended: str
) -> dict:
    """The manifest: the run's record (run_record, or a command's arguments in the same keys),
    then the git state, Python and package versions, machine, start and end."""
    return {
        **_plain(record),
        "git": dict(git),
        "packages": dict(packages),
        "machine": dict(machine),
        "started": started,
        "ended": ended,
    }


def header_lines(
    manifest: Mapping, what: str = "Config files", record: str = MANIFEST
) -> list[str]:
    """The manifest in a few markdown bullet lines: the config files (overlays marked) and
    `--config` values, the commit ("dirty" when tracked files differed from it), every setting
    that differs from the default on one line, what ran it, and a link to the full `record`."""
    files = manifest.get("config_files", [])
    sources = [f"`{f['path']}`" + (" (overlay)" if f.get("overlay") else "") for f in files]
    overrides = [f"`{k}={_value(v)}`" for k, v in flatten(manifest.get("overrides", {})).items()]
    if overrides:
        sources.append("--config " + " ".join(overrides))
    git = manifest.get("git", {})
    commit = str(git.get("commit", UNKNOWN))
    state = {True: " (dirty)", False: ""}.get(git.get("dirty"), "")
    changes = manifest.get("changes", [])
    digest = "; ".join(f"`{c}`" for c in changes) if changes else "none"
    packages = manifest.get("packages", {})
    versions = ", ".join(f"{name} {v}" for name, v in packages.items() if v is not None)
    machine = manifest.get("machine", {})
    return [
        f"- {what}: {', '.join(sources) or 'none'}",
        f"- Commit: `{commit}`{state}",
        f"- Settings that differ from the default: {digest}",
        f"- Ran with: {versions or UNKNOWN}; {machine.get('platform', UNKNOWN)}, "
        f"{machine.get('cpu_count', UNKNOWN)} CPUs; started {manifest.get('started', UNKNOWN)}, "
        f"ended {manifest.get('ended', UNKNOWN)}",
        f"- Full record: [`{record}`]({record})",
    ]

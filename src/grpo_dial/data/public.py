"""Public data files the workflow fetches itself: pinned URL, sha256, license; a local mirror.

Each public file is a config entry `public_data.<name>: {file, url, sha256, license}`: `file` is
its path relative to the data folder (`resources_dir`, git-ignored) and to a mirror (`data_mirror`,
e.g. ../shared/data, with the same layout). `locate` decides where a job reads it: the mirror's
copy when a mirror is set (checksum checked, so a changed copy is a one-line error), else the
data folder, where rule `download` writes it. `fetch` is that download: standard library only
(urllib), progress to the log, written to a temp file beside the target and renamed into place
only after its sha256 matched, so no partial or unverified file is ever left under the target
name. Standard library only, so workflow/rules/common.smk can import it at parse time.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from pathlib import Path

log = logging.getLogger("grpo_dial")

SHA256 = re.compile(r"^[0-9a-f]{64}$")
CHUNK = 1 << 20
_HASHES: dict[tuple[str, int, int], str] = {}  # (path, size, mtime_ns) -> sha256, per process


def sha256_of(path: str | Path) -> str:
    """The hex sha256 of a file (cached per process by path, size and mtime)."""
    path = Path(path)
    stat = path.stat()
    key = (str(path.resolve()), stat.st_size, stat.st_mtime_ns)
    if key not in _HASHES:
        digest = hashlib.sha256()
        with path.open("rb") as handle:
            while chunk := handle.read(CHUNK):
                digest.update(chunk)
        _HASHES[key] = digest.hexdigest()
    return _HASHES[key]


def check_entry(name: str, entry: object) -> None:
    """A one-line ValueError unless `entry` has a relative `file`, a `url` and a 64-hex `sha256`."""
    if not isinstance(entry, Mapping):
        raise ValueError(f"public_data.{name} must be a mapping, got {entry!r}")
    file = entry.get("file")
    inside = isinstance(file, str) and file and not Path(file).is_absolute()
    if not inside or ".." in Path(file).parts:
        raise ValueError(f"public_data.{name}.file must be a relative path inside the data folder")
    if not str(entry.get("url", "")).startswith(("https://", "http://", "file://")):
        raise ValueError(f"public_data.{name}.url must be an https://, http:// or file:// URL")
    if not SHA256.match(str(entry.get("sha256", ""))):
        raise ValueError(f"public_data.{name}.sha256 must be 64 lowercase hex digits")


def verify(path: str | Path, sha256: str, what: str) -> None:
    """A one-line ValueError when the file's sha256 is not the pinned one."""
    actual = sha256_of(path)
    if actual != sha256:
        raise ValueError(
            f"checksum mismatch for {what}: {path} has sha256 {actual}, expected {sha256}"
        )


def locate(
    name: str,
    entries: Mapping[str, Mapping],
    mirror: str | Path | None,
    resources: str | Path,
    partial_mirror: bool = False,
) -> tuple[Path, bool]:
    """(path a job reads, whether rule download must write it) for public file `name`.

    With a mirror its copy is used; without one, the data folder's copy, downloaded when absent.
    An existing copy is checksum-checked either way; a mismatch is a one-line ValueError, and so
    is a file the mirror lacks, unless `partial_mirror` (data_mirror: auto) lets it download."""
    if name not in entries:
        raise ValueError(f"unknown public file {name!r}; defined in public_data: {sorted(entries)}")
    entry = entries[name]
    if mirror is not None and (not partial_mirror or (Path(mirror) / entry["file"]).is_file()):
        path = Path(mirror) / entry["file"]
        if not path.is_file():
            raise ValueError(f"public file {name!r} not in data_mirror: {path} not found")
        verify(path, entry["sha256"], f"public file {name!r} (data_mirror)")
        return path, False
    path = Path(resources) / entry["file"]
    if path.is_file():  # downloaded before: still the pinned file?
        verify(path, entry["sha256"], f"public file {name!r} (delete it to download it again)")
    return path, not path.is_file()


def mirror_folder(value: str | None, repo: str | Path) -> Path | None:
    """The `data_mirror` folder: None for null / "" / "none"; "auto" = shared/data beside the
    repository when it exists (else None); a named folder must exist (one-line ValueError)."""
    if value in (None, "", "none", "null"):  # --config data_mirror=null arrives as a string
        return None
    if value == "auto":
        auto = Path(repo).resolve().parent / "shared" / "data"
        return auto if auto.is_dir() else None
    if not Path(value).is_dir():
        raise ValueError(f"folder not found: {value}")
    return Path(value)


def unsafe_output_dir(value: str, repo: str | Path, workdir: str | Path) -> str | None:
    """Why `value` cannot hold outputs (results_dir, resources_dir), or None: it must not be
    empty, the working directory, the repository or a folder above either, nor inside the
    repository's source, workflow, config, tests, docs or .git."""
    if not value.strip():
        return "must not be empty"
    path, repo = (Path(workdir) / Path(value).expanduser()).resolve(), Path(repo).resolve()
    roots = ((Path(workdir).resolve(), "the working directory"), (repo, "the repository"))
    for root, what in roots:
        if path == root or path in root.parents:
            return f"{value!r} is {what} or a folder above it; give outputs their own folder"
    for inside in ("src", "workflow", "config", "tests", "docs", ".git"):
        if path == repo / inside or repo / inside in path.parents:
            return f"{value!r} is inside the repository's {inside}/"
    if path.exists() and not path.is_dir():
        return f"{value!r} is a file, not a folder; give outputs a folder of their own"
    return None


def with_public_paths(task: Mapping, config: Mapping, repo: str | Path) -> dict:
    """`task` ({name, options}) with each source spec's `public: <name>` replaced by the path
    `locate` gives under the config's data_mirror / resources_dir (for scripts that build a
    task from a config outside Snakemake; the workflow does the same in common.smk)."""
    mirror = mirror_folder(config.get("data_mirror", "auto"), repo)
    entries, resources = config.get("public_data", {}), config.get("resources_dir", "resources")

    def resolved(spec: object) -> object:
        if not isinstance(spec, Mapping) or "public" not in spec:
            return spec
        out = {k: v for k, v in spec.items() if k != "public"}
        out["path"] = str(locate(spec["public"], entries, mirror, resources)[0])
        return out

    options = {
        key: [resolved(s) for s in value] if isinstance(value, list) else value
        for key, value in task.get("options", {}).items()
    }
    return {**task, "options": options}


def _progress(name: str) -> Callable[[int, int], None]:
    marks = set()

    def report(done: int, total: int) -> None:
        if total > 0:
            tenth = min(10, done * 10 // total)
            if tenth not in marks:
                marks.add(tenth)
                log.info("%s: %d%% (%d of %d bytes)", name, tenth * 10, done, total)
        elif done // (10 * CHUNK) not in marks:
            marks.add(done // (10 * CHUNK))
            log.info("%s: %d bytes", name, done)

    return report


def fetch(
    url: str, target: str | Path, sha256: str, timeout: float = 60.0, retries: int = 2
) -> Path:
    """Download `url` to `target` atomically: a temp file beside it, its sha256 checked, renamed.

    A network error is retried `retries` times (after 2 s, 4 s, ...); a checksum mismatch is not.
    Any failure is a one-line ValueError and leaves nothing at `target` nor a temp file behind
    (an earlier good copy at `target` is kept)."""
    for attempt in range(retries + 1):
        try:
            return _fetch_once(url, Path(target), sha256, timeout)
        except ConnectionError as error:
            if attempt == retries:
                raise ValueError(str(error)) from None
            log.warning("%s; retrying in %d s", error, 2 ** (attempt + 1))
            time.sleep(2 ** (attempt + 1))
    raise AssertionError("unreachable")


def _fetch_once(url: str, target: Path, sha256: str, timeout: float) -> Path:
    """One attempt; a network failure is a ConnectionError (retried), the rest ValueError."""
    target.parent.mkdir(parents=True, exist_ok=True)
    temp = target.with_name(f".{target.name}.part-{os.getpid()}")
    report = _progress(target.name)
    digest = hashlib.sha256()
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response, temp.open("wb") as out:
            total = int(response.headers.get("Content-Length") or 0)
            done = 0
            report(0, total)
            while chunk := response.read(CHUNK):
                out.write(chunk)
                digest.update(chunk)
                done += len(chunk)
                report(done, total)
        if digest.hexdigest() != sha256:
            raise ValueError(
                f"checksum mismatch for {url}: got sha256 {digest.hexdigest()}, expected {sha256}"
            )
        os.replace(temp, target)
    except (urllib.error.URLError, OSError) as error:
        reason = str(getattr(error, "reason", None) or error).splitlines() or [type(error).__name__]
        message = f"could not download {url}: {reason[0]}"
        if isinstance(error, urllib.error.HTTPError) and error.code < 500:
            raise ValueError(message) from None  # 404 and the like: retrying will not help
        raise ConnectionError(message) from None
    finally:
        temp.unlink(missing_ok=True)
    log.info("downloaded %s -> %s (sha256 %s)", url, target, sha256)
    return target

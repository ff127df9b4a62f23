"""Where every input of a run comes from, checked at DAG build: the output folders, the public
files and the mirror, local paths, hub ids under the offline policy, pass-rate tables, the task's
data files and the base model.

The hub-id and public-file rules themselves have one home each, grpo_dial.data.sources and
grpo_dial.data.public; this module applies them to a config and names the key on failure.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path

from grpo_dial.dag import ConfigError, fail
from grpo_dial.data.public import check_entry, locate, mirror_folder, unsafe_output_dir
from grpo_dial.data.sources import hub_offline, is_hub_id, missing_path

POLICY_TABLE = "base_policy"  # the base policy's own pass rates (rule estimate_pass_rates)


def path_is(path: object, kind: str) -> bool:
    """Whether `path` is a file ("file"), a directory ("dir") or either ("exists"); False, not an
    OSError, where the system cannot look the path up (a name too long for it)."""
    try:
        found = Path(path)
        return {"file": found.is_file, "dir": found.is_dir, "exists": found.exists}[kind]()
    except (OSError, ValueError):
        return False


def note(message: str) -> None:
    """A line for the user on stderr (a skipped optional input, a cache-only hub read)."""
    print(f"grpo-dial: {message}", file=sys.stderr)


class Inputs:
    """The config's folders and data policy; `data_file` and `hub_entry` check one reference."""

    def __init__(self, config: Mapping, repo: Path, workdir: Path) -> None:
        self.config = config
        self.results = self._output_dir("results_dir", repo, workdir)
        self.resources = self._output_dir("resources_dir", repo, workdir)
        res = [Path(self.results).resolve(), Path(self.resources).resolve()]
        if res[0] == res[1] or res[0] in res[1].parents or res[1] in res[0].parents:
            fail(
                "resources_dir",
                f"{self.resources!r} and results_dir {self.results!r} must not nest",
            )
        self.offline = bool(config["offline"])
        try:
            self.mirror = mirror_folder(config["data_mirror"], repo)
        except ValueError as error:
            fail("data_mirror", str(error))
        self.workdir = Path(workdir)
        self.public = config["public_data"]
        for name, entry in self.public.items():
            try:
                check_entry(name, entry)
            except ValueError as error:
                fail(f"public_data.{name}", str(error))
        self.public_files = {entry["file"]: name for name, entry in self.public.items()}

    def _output_dir(self, key: str, repo: Path, workdir: Path) -> str:
        """results_dir / resources_dir: a folder of its own, never the repository or above it;
        `~` expanded here, since Snakemake would make a folder named `~`; no control character
        (a trailing newline would name a folder of its own)."""
        value = self.config[key]
        if any(ord(c) < 32 or ord(c) == 127 for c in value):
            fail(key, f"{value!r} holds a control character; give a plain folder name")
        try:
            problem = unsafe_output_dir(value, repo, workdir)
        except OSError as error:  # a name too long for the file system
            problem = f"{value!r} cannot be a folder: {error.strerror}"
        if problem is not None:
            fail(key, problem)
        return os.path.expanduser(self.config[key])

    def hub_entry(self, hub: object, where: str) -> str:
        """An explicit hub id (`hub: <id>`): refused under offline: true."""
        if not isinstance(hub, str) or not is_hub_id(hub):
            fail(where, f"{hub!r} is not a hub id (owner/name)")
        if self.offline:
            fail(where, f"offline: true refuses hub access ({hub}); point it at a local copy")
        if hub_offline():
            note(f"{hub_offline()} is set: {hub} is read from the local Hugging Face cache only")
        return hub

    def data_file(
        self, ref: object, where: str, optional: bool = False, hint: str | None = None
    ) -> str | None:
        """The local path a job reads for a file reference (a path or {public: name}); None =
        skip. `hint` ("hub: ") where the entry could name the hub instead of a missing path."""
        if isinstance(ref, dict):
            name = ref["public"]
            try:
                path, needed = locate(
                    name, self.public, self.mirror, self.resources,
                    self.config["data_mirror"] == "auto",
                )  # fmt: skip
            except ValueError as error:
                fail(where, str(error))
            if needed and self.offline:  # else rule download writes `path` before its readers
                fail(
                    where,
                    f"offline: true, but public file {name!r} is neither in data_mirror nor at "
                    f"{path}",
                )
            if self.config["data_mirror"] == "auto" and path.is_absolute():
                # the mirror found beside the checkout, as a job input relative to the working
                # directory: a moved checkout (its mirror beside it) reruns nothing
                return os.path.relpath(path, self.workdir.resolve())
            return str(path)
        if path_is(ref, "exists"):
            return ref
        if optional:
            note(f"skipping {ref}: not found (optional)")
            return None
        fail(where, missing_path(ref, "input path", hint))

    def table_input(self, name: str, spec: Mapping) -> str | None | bool:
        """The file a pass-rate table's job reads (None: synthetic or hub), False when skipped."""
        where = f"passrate_tables.{name}"
        given = [key for key in ("path", "public", "hub") if key in spec]
        if len(given) > 1:
            fail(where, f"give one of path, public, hub; got {', '.join(given)}")
        if spec["kind"] == "synthetic":
            if given:
                fail(f"{where}.{given[0]}", "a synthetic table reads no file")
            return None
        if not given:
            hub = " or hub (bigmath)" if spec["kind"] == "bigmath" else ""
            fail(
                where,
                f"kind {spec['kind']} needs path (a local file), public (a public_data name){hub}",
            )
        if given == ["hub"]:
            if spec["kind"] != "bigmath":
                fail(f"{where}.hub", f"only kind bigmath reads the hub, not {spec['kind']}")
            self.hub_entry(spec["hub"], f"{where}.hub")
            return None
        if given == ["public"]:
            return self.data_file({"public": spec["public"]}, f"{where}.public")
        hint = "hub: " if spec["kind"] == "bigmath" else None
        return self.data_file(spec["path"], f"{where}.path", spec["optional"], hint) or False

    def task_spec(self, spec: object, where: str) -> object:
        """A math source spec with `public: <name>` replaced by the file's path; paths checked."""
        if not isinstance(spec, dict) or "dataset" not in spec:
            return spec
        spec = dict(spec)
        if "public" in spec:
            if "path" in spec or "hub" in spec:
                fail(where, "give one of path, public, hub")
            spec["path"] = self.data_file({"public": spec.pop("public")}, f"{where}.public")
        elif "hub" in spec:
            self.hub_entry(spec["hub"], f"{where}.hub")
        elif "path" in spec:
            self.data_file(spec["path"], f"{where}.path", hint="hub: ")
        return spec

    def local_dir(self, path: str | None, where: str, what: str) -> None:
        """A directory read locally (a tokenizer), never looked up on the hub."""
        if path is not None and not path_is(path, "dir"):
            fail(where, missing_path(path, what, None))


def task(config: Mapping, inputs: Inputs) -> dict:
    """config['task'] with its source specs resolved, built once so a bad option fails here."""
    from grpo_dial.data.tasks import option_error  # numpy and pandas, no torch

    options = {
        key: [inputs.task_spec(s, f"task.options.{key}[{i}]") for i, s in enumerate(value)]
        if isinstance(value, list) else value
        for key, value in config["task"]["options"].items()
    }  # fmt: skip
    if (error := option_error(config["task"]["name"], options)) is not None:
        raise ConfigError(error)
    return {"name": config["task"]["name"], "options": options}


def task_inputs(task: Mapping) -> dict[str, str]:
    """Every data file the task reads, so rule download runs before the policy jobs."""
    return {
        f"task_{key}_{i}": spec["path"]
        for key, value in task["options"].items() if isinstance(value, list)
        for i, spec in enumerate(value) if isinstance(spec, dict) and "path" in spec
    }  # fmt: skip


def check_capacity(task: Mapping, asked: Mapping[str, tuple[str, int]]) -> None:
    """Each split's distinct prompts must cover what the config asks of it (asked: split ->
    (config key, prompts)), for a task that counts them (`capacity`, e.g. arithmetic's small
    one-digit levels); the job would find it only after the upstream work."""
    from grpo_dial.data.tasks import TASKS, task_from_spec  # no torch

    if not callable(getattr(TASKS.get(task.get("name")), "capacity", None)):
        return
    built = task_from_spec(task)
    for split, (key, n) in asked.items():
        cap = built.capacity(split)
        if cap is not None and n > cap:
            fail(key, f"{n} prompts, but the task's {split!r} split holds {cap} at its level "
                      "weights (its one-digit levels are small); ask for at most that many")


def check_strata(keyed: Mapping[str, str], task: Mapping) -> None:
    """Each arm's stratum key (arm name -> key) must be one the task gives every response."""
    from grpo_dial.data.tasks import stratum_error, task_from_spec  # no torch

    if keyed:
        built = task_from_spec(task)
        for name, key in keyed.items():
            if (why := stratum_error(built, key)) is not None:
                fail(f"dials.{name}.strata", why)

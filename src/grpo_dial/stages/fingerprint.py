"""The source a rule's job executes, as one fingerprint: editing a module reruns exactly the jobs
that run it (Snakemake's `params` trigger), with no torch imported and nothing executed.

A rule's stage is `stages.<module>.<function>` (stages.registry.RULES). What it executes is found
statically (ast): the stage module's module-level imports and the imports inside that function,
then, transitively, every import (module level or inside any function) of each grpo_dial module
reached, a package's `__init__.py` included. The fingerprint is the sha256 over the sorted
(path relative to the package, sha256 of the file's bytes) of that closure, so a moved checkout
gives the same fingerprint and an unrelated edit none. The generic rule script
(workflow/scripts/stage.py) and the registry only dispatch; the registry's line for the rule is in
the fingerprint, the script is not.
"""

from __future__ import annotations

import ast
import hashlib
from functools import cache
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1]  # src/grpo_dial


def _path(module: str, root: Path = PACKAGE) -> Path | None:
    """The file of a grpo_dial module (or package) under `root`, None when it is none."""
    parts = module.split(".")[1:]
    base = root.joinpath(*parts)
    for path in (base.with_suffix(".py"), base / "__init__.py"):
        if path.is_file():
            return path
    return None


def _imports(nodes, root: Path = PACKAGE) -> set[str]:
    """grpo_dial modules imported by the statements under `nodes` (`from pkg import module`
    names the module where one exists, else the package)."""
    found: set[str] = set()
    for node in nodes:
        for sub in ast.walk(node):
            if isinstance(sub, ast.Import):
                found |= {a.name for a in sub.names if a.name.split(".")[0] == "grpo_dial"}
            elif isinstance(sub, ast.ImportFrom) and sub.level == 0 and sub.module:
                if sub.module.split(".")[0] != "grpo_dial":
                    continue
                for alias in sub.names:
                    child = f"{sub.module}.{alias.name}"
                    found.add(child if _path(child, root) is not None else sub.module)
    return found


@cache
def _module_imports(module: str, root: Path = PACKAGE) -> frozenset[str]:
    """Every grpo_dial module `module` imports anywhere, with the packages above each."""
    path = _path(module, root)
    if path is None:
        return frozenset()
    found = _imports([ast.parse(path.read_text())], root)
    parents = {".".join(m.split(".")[:i]) for m in found for i in range(2, m.count(".") + 1)}
    return frozenset(found | parents)


def closure(stage: str, root: Path = PACKAGE) -> list[Path]:
    """The files stage `<module>.<function>` (under grpo_dial.stages) executes, sorted: the
    package at `root` (a copy of src/grpo_dial; the installed one by default)."""
    module, function = stage.rsplit(".", 1)
    module = f"grpo_dial.stages.{module}"
    path = _path(module, root)
    if path is None:
        raise ValueError(f"stage module {module} not found")
    tree = ast.parse(path.read_text())
    funcs = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == function]
    if not funcs:
        raise ValueError(f"stage {stage!r}: no function {function} in {module}")
    top = [n for n in tree.body if not isinstance(n, ast.FunctionDef | ast.ClassDef)]
    helpers = [n for n in tree.body if isinstance(n, ast.FunctionDef | ast.ClassDef)
               and n.name.startswith("_")]  # fmt: skip
    # the stage module itself counts by its top level, the function and its private helpers
    # (`fingerprint`): the other stages of the module are other rules'
    seen: set[str] = {module}
    todo = list(_imports(top + funcs + helpers, root) | {"grpo_dial", "grpo_dial.stages"})
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        todo += [m for m in _module_imports(name, root) if m not in seen]
    seen.discard(module)
    files = {p for m in seen if (p := _path(m, root)) is not None}
    return sorted(files)


def fingerprint(rule: str, root: Path = PACKAGE) -> str:
    """A short hex digest of the source rule `rule` executes (its closure, plus the stage
    module's top level, the stage function and its private helpers), read under `root`."""
    from grpo_dial.stages.registry import RULES

    stage = RULES[rule]
    module, function = stage.rsplit(".", 1)
    source = (root / "stages" / f"{module}.py").read_text()
    tree = ast.parse(source)
    own = [ast.get_source_segment(source, n) or "" for n in tree.body
           if not isinstance(n, ast.FunctionDef | ast.ClassDef)
           or n.name == function or n.name.startswith("_")]  # fmt: skip
    digest = hashlib.sha256(f"{rule}={stage}\n".encode())
    digest.update("\n".join(own).encode())
    for path in closure(stage, root):
        digest.update(f"{path.relative_to(root).as_posix()}:{_digest(path)}\n".encode())
    return digest.hexdigest()[:16]


@cache
def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


__all__ = ["closure", "fingerprint"]

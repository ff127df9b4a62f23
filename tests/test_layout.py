"""The package's shape: every import runs down the pipeline's layers, no cycles, small modules.

The layers, lowest first (a module may import its own package and any lower layer):
    tables, core  ->  data  ->  policy  ->  passrates  ->  train  ->  analysis  ->  external
    ->  stages  ->  tools
`figures` stands apart: it draws from tables and imports no other part of grpo_dial. Lazy imports
inside functions count too, so an arrow cannot hide in a function body.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "grpo_dial"
LAYERS = {
    "tables": 0,
    "core": 0,
    "data": 1,
    "policy": 2,
    "passrates": 3,
    "train": 4,
    "analysis": 5,
    "external": 6,
    "stages": 7,
    "tools": 8,
}
MAX_LINES = 400


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def imports_of(path: Path) -> set[str]:
    """Every grpo_dial module `path` imports, at module level or inside a function."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith("grpo_dial")}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module.startswith("grpo_dial"):
                for alias in node.names:  # `from pkg import module` names a module
                    sub = f"{node.module}.{alias.name}"
                    found.add(sub if sub in MODULES else node.module)
    return found


GRAPH = {name: imports_of(path) for name, path in MODULES.items()}


def part(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def test_every_module_is_in_a_known_part():
    unknown = {m for m in MODULES if part(m) not in LAYERS and part(m) not in ("", "figures")}
    assert not unknown, f"modules outside the layered parts: {sorted(unknown)}"


def test_imports_run_down_the_layers():
    upward = []
    for module, targets in GRAPH.items():
        src = part(module)
        for target in targets:
            dst = part(target)
            if dst in ("", src):
                continue
            if src == "figures" or dst == "figures":
                if src == "figures" or src not in ("stages", "tools"):
                    upward.append(f"{module} -> {target}")
            elif LAYERS.get(dst, 99) > LAYERS.get(src, -1):
                upward.append(f"{module} -> {target}")
    assert not upward, "imports that run up the layers:\n" + "\n".join(sorted(upward))


def test_core_imports_nothing_of_the_project():
    """core is closed forms and the advantage: nothing outside it, and inside it only the
    advantage module reads its two leaves (the dial's fields, the token weights)."""
    leaves = {"grpo_dial.core.dial", "grpo_dial.core.token_weights"}
    allowed = {"grpo_dial.core.advantage": leaves}
    inward = {
        m: sorted(set(t) - allowed.get(m, set()))
        for m, t in GRAPH.items()
        if part(m) == "core" and set(t) - allowed.get(m, set())
    }
    assert not inward, inward


def test_figures_import_no_torch():
    heavy = []
    for name, path in MODULES.items():
        if part(name) != "figures":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            heavy += [f"{name}: {n}" for n in names if n.split(".")[0] in ("torch", "transformers")]
    assert not heavy, heavy


def test_no_import_cycle():
    state: dict[str, int] = {}
    cycle: list[str] = []

    def visit(node: str, stack: list[str]) -> bool:
        state[node] = 1
        for nxt in sorted(GRAPH.get(node, ())):
            if nxt not in MODULES or nxt == node:
                continue
            if state.get(nxt) == 1:
                cycle.extend(stack[stack.index(nxt) :] + [nxt])
                return True
            if state.get(nxt) is None and visit(nxt, stack + [nxt]):
                return True
        state[node] = 2
        return False

    for name in MODULES:
        if state.get(name) is None and visit(name, [name]):
            break
    assert not cycle, "import cycle: " + " -> ".join(cycle)


@pytest.mark.parametrize("name", sorted(MODULES))
def test_module_is_small(name):
    lines = len(MODULES[name].read_text().splitlines())
    assert lines <= MAX_LINES, f"{name} has {lines} lines (> {MAX_LINES}): split it by concern"


def test_the_guard_sees_a_planted_upward_import(tmp_path):
    planted = tmp_path / "x.py"
    planted.write_text("def f():\n    from grpo_dial.train.step import score\n")
    assert imports_of(planted) == {"grpo_dial.train.step"}

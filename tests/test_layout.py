"""The package's shape: every import runs down the pipeline's layers, no cycles, small modules.

The layers, lowest first (a module may import its own package and any lower layer; two parts on
one layer import neither of each other):
    tables, core  ->  data  ->  policy  ->  passrates, analysis  ->  train  ->  external
    ->  backends  ->  dag  ->  stages  ->  tools
The analyses (one subpackage or module per study) sit below the trainer: they read tables and,
for the aware study, differentiate a policy, but never train one; every model update goes
through grpo_dial.backends (the TRL backend turns its logs into tables through external's
importer, so the backends sit above both the own trainer and external; the DAG build reads the
TRL translation's refusals). `figures` stands apart: it draws from tables and imports no other
part of grpo_dial. Lazy imports inside functions count too, so an arrow cannot hide in a function
body. docs/layout.md's package section names every module and subpackage, and only modules that
exist, and its layers line is this one; what it calls "standard library only" loads nothing else
at import; it names every file of tools/ and .ci/ and every helper module of tests/.
"""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "grpo_dial"
LAYERS = {
    "tables": 0,
    "core": 0,
    "data": 1,
    "policy": 2,
    "passrates": 3,
    "analysis": 3,
    "train": 4,
    "external": 5,
    "backends": 6,
    "dag": 7,
    "stages": 8,
    "tools": 9,
}
MAX_LINES = 400
WORKFLOW = PACKAGE.parents[1] / "workflow"
MAX_COMMON_LINES = 250  # common.smk is glue: target lists and the one call into grpo_dial.dag


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
    """core is closed forms and the advantage: nothing outside it; inside it every module may
    use the shared field checks, the settings and the std factor, and only the estimator's
    modules read each other (the advantage reads the dial, the registry and the token weights),
    and the registry adds its estimators' labels to the arms' display names; its entries
    (estimators, and the engines' two modules it imports first) take HA-DW's update rules'
    names from the anchor's module (the one list of them) and the token weights."""
    shared = {"grpo_dial.core.checks", "grpo_dial.core.settings", "grpo_dial.core.std_factor"}
    leaves = {"grpo_dial.core.dial", "grpo_dial.core.token_weights", "grpo_dial.core.estimators"}
    allowed = {m: shared for m in MODULES if part(m) == "core"}
    allowed["grpo_dial.core.advantage"] = shared | leaves
    allowed["grpo_dial.core.dial"] = shared | {
        "grpo_dial.core.estimators",
        "grpo_dial.core.allocation",
    }
    allowed["grpo_dial.core.arm_names"] = shared | {"grpo_dial.core.estimators"}  # the labels
    engines = {"grpo_dial.core.engine_estimators", "grpo_dial.core.engine_losses"}
    for name in engines:
        allowed[name] = shared | {"grpo_dial.core.registry", "grpo_dial.core.token_weights"}
    allowed["grpo_dial.core.estimators"] = (
        shared
        | engines
        | {
            "grpo_dial.core.registry",
            "grpo_dial.core.token_weights",
            "grpo_dial.core.arm_names",
            "grpo_dial.core.difficulty_anchor",
        }
    )
    # a closed form built on another: the whitening's length drift on the tail model
    allowed["grpo_dial.core.estimator_mass"] = shared | {"grpo_dial.core.length_drift"}
    # the tail model's closed forms share its Laplace transforms; OPO's integrals are their own
    laplace = {"grpo_dial.core.tail_laplace"}
    allowed["grpo_dial.core.length_weighted_drift"] = shared | laplace
    opo = {"grpo_dial.core.length_weighted_drift"}
    allowed["grpo_dial.core.length_drift"] = shared | laplace | opo
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


def test_workflow_glue_is_thin():
    """common.smk holds target lists and glue (the checks live in grpo_dial.dag), and
    workflow/scripts holds one generic stage entry."""
    common = WORKFLOW / "rules" / "common.smk"
    lines = len(common.read_text().splitlines())
    assert lines < MAX_COMMON_LINES, f"common.smk has {lines} lines (>= {MAX_COMMON_LINES})"
    for path in sorted(WORKFLOW.rglob("*.smk")) + sorted((WORKFLOW / "scripts").glob("*.py")):
        lines = len(path.read_text().splitlines())
        assert lines <= MAX_LINES, f"{path.name} has {lines} lines (> {MAX_LINES})"


def test_no_reexports():
    """A name is imported from the module that defines it: no `import x as x` shims."""
    shims = []
    for name, path in MODULES.items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("grpo_dial"):
                shims += [f"{name}: {a.name}" for a in node.names if a.asname == a.name]
    assert not shims, shims


CLOSED_FORMS = ("theory", "group_bias", "length_drift", "length_weighted_drift", "tail_laplace",
                "bands", "estimator_mass")  # numpy  # fmt: skip


def test_the_closed_forms_are_apart_from_the_estimator():
    """core's two wings: the closed forms (numpy/scipy) import no torch and nothing of the
    estimator (advantage, dial, estimators, token weights); they share only core.checks and
    core.std_factor with it (and may build on each other)."""
    crossing = []
    for name in CLOSED_FORMS:
        module = f"grpo_dial.core.{name}"
        tree = ast.parse(MODULES[module].read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Import | ast.ImportFrom):
                names = (
                    [a.name for a in node.names]
                    if isinstance(node, ast.Import)
                    else [node.module or ""]
                )
                crossing += [f"{module}: {n}" for n in names if n.split(".")[0] == "torch"]
        allowed = {"grpo_dial.core.checks", "grpo_dial.core.std_factor"}
        allowed |= {f"grpo_dial.core.{other}" for other in CLOSED_FORMS}  # within the wing
        crossing += [f"{module} -> {t}" for t in GRAPH[module] - allowed]
    assert not crossing, crossing


def test_no_analysis_module_imports_torch_unless_it_runs_the_estimator_or_differentiates():
    """The analyses that run the estimator on tensors (the simulations, the identity, the
    advantages of an imported run) or differentiate a policy (the aware study's tail kernel) may
    import torch; every other analysis is numpy/pandas."""
    trains = {
        "grpo_dial.analysis.simulate.controlled",
        "grpo_dial.analysis.length_bias.step",
        "grpo_dial.analysis.theory.identity",
        "grpo_dial.analysis.length_bias.pressure",
        "grpo_dial.analysis.aware.tabular",
        "grpo_dial.analysis.aware.kernel",
        "grpo_dial.analysis.theory.estimators",
    }
    heavy = []
    for name, path in MODULES.items():
        if part(name) != "analysis" or name in trains:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                heavy += [f"{name}: {a.name}" for a in node.names if a.name == "torch"]
            elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("torch"):
                heavy.append(f"{name}: {node.module}")
            elif isinstance(node, ast.ImportFrom) and node.module == "grpo_dial.core.advantage":
                heavy.append(f"{name}: grpo_dial.core.advantage (torch)")
    assert not heavy, heavy


LAYOUT_DOC = PACKAGE.parents[1] / "docs" / "layout.md"


def _bullet_texts(text: str) -> list[str]:
    """Each bullet of layout.md's package section as one line of text."""
    section = text.split("## The package", 1)[1].split("\n## ", 1)[0]
    bullets: list[str] = []
    for line in section.splitlines():
        if line.startswith("- "):
            bullets.append(line)
        elif bullets and line.startswith("  "):
            bullets[-1] += " " + line.strip()
    return bullets


def _package_bullets(text: str) -> list[list[str]]:
    """The backticked names of each bullet of layout.md's package section, bullet by bullet."""
    return [re.findall(r"`([^`]+)`", bullet) for bullet in _bullet_texts(text)]


def _module_token(token: str) -> bool:
    """A module path as layout.md writes one: `name.py`, `sub/`, `sub/name.py`."""
    return re.fullmatch(r"[a-z_][a-z0-9_]*(/[a-z_][a-z0-9_]*)*(\.py|/)", token) is not None


def _resolve(token: str, home: Path, below: bool = True) -> list[Path]:
    """What a module token names: a path (with '/') from the package, from `home` or from the
    repository; a bare name, the file or folder of that name in `home` (or below it)."""
    name = token.rstrip("/")
    wanted = Path.is_dir if token.endswith("/") else Path.is_file
    if "/" in name:
        found = [root / name for root in (PACKAGE, home, PACKAGE.parents[1])]
    else:
        found = [home / name]
        found += [p for p in home.rglob(name) if "__pycache__" not in p.parts] if below else []
    return sorted({p for p in found if wanted(p)})


def _layout_names() -> tuple[set[Path], list[str]]:
    """(every path layout.md names, the tokens that name nothing or more than one thing). A
    bullet's first name is a part of the package (`core/`, `tables.py`); the rest resolve in it."""
    named: set[Path] = set()
    bad: list[str] = []
    for tokens in _package_bullets(LAYOUT_DOC.read_text()):
        tokens = [t for t in tokens if _module_token(t)]
        if not tokens:
            continue
        head = _resolve(tokens[0], PACKAGE, below=False)
        home = head[0] if len(head) == 1 and head[0].is_dir() else PACKAGE
        for token, found in [(tokens[0], head)] + [(t, _resolve(t, home)) for t in tokens[1:]]:
            if len(found) != 1:
                bad.append(f"`{token}` ({len(found)} matches in {home.name}/)")
            named |= set(found)
    return named, bad


def test_layout_doc_names_every_module_and_only_real_ones():
    """docs/layout.md's package section names every module (each .py but __init__.py) and
    subpackage of src/grpo_dial, and every module path it names exists, once."""
    named, bad = _layout_names()
    modules = [p for p in PACKAGE.rglob("*.py") if p.name != "__init__.py"]
    packages = [p.parent for p in PACKAGE.rglob("__init__.py") if p.parent != PACKAGE]
    unnamed = sorted(str(p.relative_to(PACKAGE)) for p in modules + packages if p not in named)
    assert not unnamed, f"docs/layout.md does not name: {unnamed}"
    assert not bad, f"docs/layout.md names modules that are not one path: {bad}"


STDLIB_ONLY = "standard library only"


def _stdlib_only_modules(text: str) -> list[Path]:
    """The modules layout.md's package section calls "standard library only": the last module
    named before each such phrase in its bullet, resolved as `_layout_names` resolves it."""
    found: list[Path] = []
    for bullet in _bullet_texts(text):
        tokens = [t for t in re.findall(r"`([^`]+)`", bullet) if _module_token(t)]
        if not tokens:
            continue
        head = _resolve(tokens[0], PACKAGE, below=False)
        home = head[0] if len(head) == 1 and head[0].is_dir() else PACKAGE
        for at in (m.start() for m in re.finditer(STDLIB_ONLY, bullet)):
            before = [t for t in re.findall(r"`([^`]+)`", bullet[:at]) if _module_token(t)]
            found += _resolve(before[-1], home) if before else []
    return found


def _loaded_at_import(path: Path) -> set[str]:
    """The top-level names of everything importing `path` loads but grpo_dial: its imports
    outside functions, and those of every grpo_dial module (and parent package) they reach."""
    outside: set[str] = set()
    todo, seen = [module_name(path)], set()
    while todo:
        name = todo.pop()
        if name in seen or name not in MODULES:
            continue
        seen.add(name)
        todo += [name.rsplit(".", 1)[0]] if "." in name else []  # its package's __init__
        nodes = list(ast.parse(MODULES[name].read_text()).body)
        while nodes:
            node = nodes.pop()
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                continue  # a lazy import runs when called, not at import
            nodes += list(ast.iter_child_nodes(node))
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            else:
                continue
            todo += [n for n in names if n.startswith("grpo_dial")]
            outside |= {n.split(".")[0] for n in names if not n.startswith("grpo_dial")}
    return outside - {"__future__"}


def test_what_layout_doc_calls_standard_library_only_is():
    """Every module docs/layout.md calls "standard library only" loads, at import, nothing but
    the standard library (sys.stdlib_module_names), through every grpo_dial module it imports."""
    modules = _stdlib_only_modules(LAYOUT_DOC.read_text())
    assert modules, f"docs/layout.md calls no module {STDLIB_ONLY!r}"
    heavy = {
        str(p.relative_to(PACKAGE)): sorted(_loaded_at_import(p) - sys.stdlib_module_names)
        for p in modules
    }
    heavy = {name: names for name, names in heavy.items() if names}
    assert not heavy, f"docs/layout.md calls these {STDLIB_ONLY!r}, but they load: {heavy}"


def test_the_stdlib_guard_sees_numpy_through_a_grpo_dial_module():
    """core.dial imports no numpy itself, but core.estimators' anchor does."""
    assert "numpy" in _loaded_at_import(PACKAGE / "core" / "dial.py")
    assert "torch" not in _loaded_at_import(PACKAGE / "core" / "dial.py")


def test_layout_doc_names_every_tool_ci_script_and_test_helper():
    """docs/layout.md names (anywhere, by its path from the repository) every file of the
    top-level tools/ and .ci/ folders and every top-level helper module tests/*.py."""
    root = PACKAGE.parents[1]
    files = [p for d in ("tools", ".ci") for p in (root / d).rglob("*") if p.is_file()]
    files += [p for p in (root / "tests").glob("*.py") if not p.name.startswith("test_")]
    names = [str(p.relative_to(root)) for p in files if "__pycache__" not in p.parts]
    text = LAYOUT_DOC.read_text()
    unnamed = sorted(name for name in names if name not in text)
    assert not unnamed, f"docs/layout.md does not name: {unnamed}"


def test_only_the_dag_reads_the_configs_arms():
    """Every arm is resolved once, at DAG build (grpo_dial.dag.arms): no other module or rule
    file reads `config["dials"]`; they take the Plan's resolved arms."""
    pattern = re.compile(r"""config(\.get\(|\[)\s*["']dials["']""")
    files = [p for name, p in MODULES.items() if part(name) != "dag"]
    files += sorted((WORKFLOW / "rules").glob("*.smk"))
    readers = [str(p) for p in files if pattern.search(p.read_text())]
    assert not readers, readers


def test_every_model_update_goes_through_the_backends():
    """The training loop (grpo_dial.train.loop) is driven by the backends alone (and by the
    tools that benchmark or device-check the trainer itself): no analysis or stage trains a
    policy around them, so an arm's backend is honoured everywhere."""
    drivers = {"train", "backends", "tools"}
    around = [
        f"{name} -> {t}"
        for name, targets in GRAPH.items()
        for t in targets
        if t in ("grpo_dial.train.loop", "grpo_dial.train") and part(name) not in drivers
    ]
    assert not around, around


def test_layout_doc_states_these_layers():
    """docs/layout.md's layers line is this module's."""
    line = "tables, core  ->  data  ->  policy  ->  passrates, analysis  ->  train  ->  external"
    assert line in LAYOUT_DOC.read_text()


def test_configuration_page_lists_every_preset():
    """docs/configuration.md's `dials.<name>` row names every preset of core.dial.PRESETS."""
    from grpo_dial.core.dial import PRESETS

    page = (PACKAGE.parents[1] / "docs" / "configuration.md").read_text()
    row = next(line for line in page.splitlines() if line.startswith("| `dials.<name>` |"))
    listed = re.search(r"`core\.dial\.PRESETS`: ([a-z_, ]+)\)", row)
    assert listed, "the dials row names no preset list"
    assert sorted(listed.group(1).split(", ")) == sorted(PRESETS)
    assert f"the {len(PRESETS)} of" in row

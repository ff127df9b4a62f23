"""The arms' display names come from one source, grpo_dial.core.arm_names.display_names (the
registry's labels and the table of the other arms): the stages pass it to every figure that names
arms (names=, no state in grpo_dial.figures), the summary reads it, the palette is keyed by the
same arm keys, and no other module spells an arm's name."""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib import pyplot as plt

from grpo_dial import figures
from grpo_dial.analysis.arms import SIMULATION_DEFAULT
from grpo_dial.analysis.simulate.controlled import SimulationConfig, simulate
from grpo_dial.analysis.simulate.summary import summarize
from grpo_dial.analysis.summary.training import RUNS, rl_runs
from grpo_dial.core.arm_names import display_names
from grpo_dial.stages.registry import stage_for
from grpo_dial.tables import write_table

PACKAGE = Path(__file__).resolve().parents[2] / "src" / "grpo_dial"


def _named_figures() -> set[tuple[str, str]]:
    """(module, function) of every figure (a `*_figure` function) that takes the names table."""
    found = set()
    for info in pkgutil.iter_modules(figures.__path__):
        module = importlib.import_module(f"grpo_dial.figures.{info.name}")
        for name, fn in inspect.getmembers(module, inspect.isfunction):
            takes = "names" in inspect.signature(fn).parameters
            if fn.__module__ == module.__name__ and name.endswith("_figure") and takes:
                found.add((module.__name__, name))
    return found


def _figure_calls(path: Path) -> list[tuple[tuple[str, str], ast.Call]]:
    """Calls in a stage module to a function of grpo_dial.figures.*, resolved through the
    function-local imports (`from grpo_dial.figures.x import f as draw`, `... import x as f`)."""
    calls = []
    for fn in ast.walk(ast.parse(path.read_text())):
        if not isinstance(fn, ast.FunctionDef):
            continue
        funcs, modules = {}, {}
        for node in ast.walk(fn):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(
                "grpo_dial.figures"
            ):
                for a in node.names:
                    if node.module == "grpo_dial.figures" and a.name != "save":
                        modules[a.asname or a.name] = f"grpo_dial.figures.{a.name}"
                    else:
                        funcs[a.asname or a.name] = (node.module, a.name)
        for node in ast.walk(fn):
            if not isinstance(node, ast.Call):
                continue
            f = node.func
            if isinstance(f, ast.Name) and f.id in funcs:
                calls.append((funcs[f.id], node))
            elif isinstance(f, ast.Attribute) and getattr(f.value, "id", None) in modules:
                calls.append(((modules[f.value.id], f.attr), node))
    return calls


def test_every_figure_stage_passes_the_one_table_to_every_figure_that_names_arms():
    named = _named_figures()
    assert ("grpo_dial.figures.channel", "channel_figure") in named  # the scan sees them
    called = {}
    for path in sorted((PACKAGE / "stages").glob("*.py")):
        for target, call in _figure_calls(path):
            if target in named:
                passed = {k.arg: k.value for k in call.keywords}
                value = passed.get("names")
                ok = (  # names=display_names(), or a local `names` bound to it
                    isinstance(value, ast.Call) and getattr(value.func, "id", "") == "display_names"
                ) or (isinstance(value, ast.Name) and value.id == "names")
                called[target] = called.get(target, True) and ok
    assert called == dict.fromkeys(named, True)  # each drawn by a stage, always with the names


def test_a_figure_stage_draws_the_names_of_the_one_table(tmp_path, monkeypatch):
    """rule simulation_figure end to end from its tables on disk: the legend reads display_names(),
    whatever was drawn before (the stage lookup sets nothing)."""
    steps, prompts = simulate(np.random.default_rng(0).beta(0.7, 0.9, 300),
                              SimulationConfig(n_prompts=40, steps=2))  # fmt: skip
    tables = {"steps": steps, "prompts": prompts, "summary": summarize(steps, prompts)}
    inputs = {k: str(tmp_path / f"{k}.parquet") for k in tables}
    for k, frame in tables.items():
        write_table(frame, inputs[k])
    drawn = []
    monkeypatch.setattr(figures, "save", lambda fig, *paths: drawn.append(fig))
    stage_for("simulation_figure")(inputs, {"figure_png": str(tmp_path / "f.png")}, {})
    legend = [t.get_text() for t in drawn[0].axes[0].get_legend().get_texts()]
    assert legend == [display_names()[arm] for arm in SIMULATION_DEFAULT]
    plt.close(drawn[0])


def test_label_and_palette_read_the_table_they_are_given():
    names = {"grpo": "G-label"}
    assert figures.label("grpo", names) == "G-label" and figures.label("dapo", names) == "dapo"
    assert figures.label("grpo") == "grpo"  # no table: the key, whatever was passed before
    assert not hasattr(figures, "use_names") and not hasattr(figures, "NAMES")


def test_the_palette_is_keyed_by_arm_keys():
    assert set(figures.COLORS) <= set(display_names())
    assert figures.palette(["grpo", "no_such_arm"], {"grpo": "G-label"}) == {
        "G-label": figures.COLORS["grpo"], "no_such_arm": "grey"
    }  # fmt: skip
    assert figures.palette(["grpo"]) == {"grpo": figures.COLORS["grpo"]}


def test_the_summary_names_arms_from_the_table():
    cols = ["accuracy_before", "accuracy_after", "heldout_sampled_before", "heldout_sampled_after",
            "heldout_greedy_before", "heldout_greedy_after", "incorrect_share",
            "within_incorrect_work", "within_incorrect_redundant", "mix", "within_correct",
            "final_silent_fraction", "extreme_mass_share", "incorrect_share_lo",
            "incorrect_share_hi", "within_incorrect", "within_incorrect_lo", "within_incorrect_hi",
            "within_correct_lo", "within_correct_hi"]  # fmt: skip
    row = {"seed": 0, "total": 1.0, "total_lo": 0.0, "total_hi": 2.0, **dict.fromkeys(cols, 0.5)}
    runs = pd.DataFrame([{"dial": d, **row} for d in ("grpo", "nostd_sequence")])
    text = "\n".join(rl_runs({RUNS: runs}))
    for dial in ("grpo", "nostd_sequence"):
        name = display_names()[dial]
        assert f"| {name} | 1 |" in text and f"| {name} | 0 |" in text


def _name_tables(path: Path) -> list[int]:
    """Lines of dict literals mapping two or more arm keys to strings other than colours and
    release numbers, every string value short (a display name is at most 40 characters; a table
    holding sentences, such as core/estimator_mass's relations to Dr. GRPO, is not a table of
    names)."""
    found, arms = [], display_names()
    for node in ast.walk(ast.parse(path.read_text())):
        if not isinstance(node, ast.Dict):
            continue
        pairs = [(k.value, v.value) for k, v in zip(node.keys, node.values, strict=True)
                 if isinstance(k, ast.Constant) and isinstance(v, ast.Constant)]  # fmt: skip
        names = [k for k, v in pairs  # a name has a letter: "0.26.0" is a release, not a name
                 if k in arms and isinstance(v, str) and not v.startswith("#")
                 and any(c.isalpha() for c in v)]  # fmt: skip
        if len(names) >= 2 and all(len(v) <= 40 for _, v in pairs if isinstance(v, str)):
            found.append(node.lineno)
    return found


def test_no_other_module_holds_a_table_of_arm_names():
    tables = {
        str(p.relative_to(PACKAGE)): lines
        for p in sorted(PACKAGE.rglob("*.py"))
        if p != PACKAGE / "core" / "arm_names.py" and (lines := _name_tables(p))
    }
    assert not tables, tables
    assert _name_tables(PACKAGE / "core" / "arm_names.py")  # the guard sees the one table

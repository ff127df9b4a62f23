"""grpo_dial.dag.config_checks on its own (the workflow tests run the same inputs through
Snakemake): each bad input gives one line naming its key or file; good configs give None."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from grpo_dial.dag.config_checks import config_problems, file_problem, value_problem
from grpo_dial.dag.plan import SCHEMA as SCHEMA_PATH
from grpo_dial.dag.schema import read_schema

REPO = Path(__file__).resolve().parents[2]
SCHEMA = read_schema(REPO / SCHEMA_PATH)  # the one schema, its dial part generated
DEFAULT = yaml.safe_load((REPO / "config" / "config.yaml").read_text())


def _with(path: str, value):
    config = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    *outer, last = path.split(".")
    node = config
    for key in outer:
        node = node.setdefault(key, {})
    node[last] = value
    return config


def test_the_shipped_configs_have_no_problem():
    assert (REPO / SCHEMA_PATH).is_file()
    files = sorted((REPO / "config").glob("*.yaml"))
    assert len(files) > 5
    for path in files:
        assert file_problem(path) is None, path
    assert value_problem(DEFAULT, SCHEMA) is None


@pytest.mark.parametrize(
    "path, value, line",
    [
        ("model.device", "gpu", "config error at 'model.device': 'gpu' is not a torch device"),
        ("train.seeds", [0, -1], "config error at 'train.seeds.1': seed -1 is out of range"),
        ("train.seeds", [10**19], "config error at 'train.seeds.0': seed 10000000000000000000"),
        ("simulate.seed", -3, "config error at 'simulate.seed': seed -3 is out of range"),
        ("train.lr", "1e-4", "config error at 'train.lr': '1e-4' is text to YAML 1.1"),
        ("train.lr", "1.5e4", "write 1.5e+4"),
        ("train.steps", 5.0, "config error at 'train.steps': 5.0 must be an integer; write 5"),
        ("length_bias.group_size", 1, "config error at 'length_bias.group_size': 1 gives"),
    ],
)
def test_bad_values_give_one_line_naming_the_key(path, value, line):
    problem = value_problem(_with(path, value), SCHEMA)
    assert problem is not None and line in problem and "\n" not in problem
    if "YAML 1.1" in line:
        assert "write 1.0e-4" in problem
        assert yaml.safe_load("lr: 1.0e-4")["lr"] == 1e-4  # the hint is a float to PyYAML


def test_fixed_values_pass():
    for path, value in (("model.device", "cuda:1"), ("train.seeds", [0, 2**32 - 1]),
                        ("train.lr", 1e-4), ("length_bias.group_size", 2)):  # fmt: skip
        assert value_problem(_with(path, value), SCHEMA) is None, path


def test_dotted_keys_and_numbers_as_text_say_how_to_nest():
    problem = value_problem({**DEFAULT, "train.steps": 5}, SCHEMA)
    assert problem.startswith("config error at 'train.steps': keys are nested, not dotted")
    assert "'train: {steps: ...}'" in problem and "\n" not in problem
    # what Snakemake makes of --config 'train={steps: 5}': every nested value as text
    problem = value_problem(_with("train.steps", "5"), SCHEMA)
    assert problem.startswith("config error at 'train.steps': '5' is text, not a number")
    assert value_problem(_with("model.base", "7"), SCHEMA) is None  # a string key may hold digits


@pytest.mark.parametrize(
    "text, fragments",
    [
        ("train:\n  steps: 5\n  steps: 50\n", ["key 'steps' is given twice", "lines 2 and 3"]),
        (
            "dials:\n  grpo: {preset: grpo}\n  grpo: {preset: dapo}\n",
            ["key 'grpo' is given twice"],
        ),
        ("train: !!python/object:builtins.dict {}\n", ["tag", "python/object", "line 1"]),
        ("train: [1, 2\n", ["not valid YAML"]),
    ],
)
def test_bad_files_give_one_line_naming_the_file(tmp_path, text, fragments):
    path = tmp_path / "overlay.yaml"
    path.write_text(text)
    problem = config_problems(DEFAULT, [REPO / "config" / "config.yaml", path], SCHEMA)
    assert problem is not None and str(path) in problem and "\n" not in problem
    for fragment in fragments:
        assert fragment in problem, problem
    assert "tab" not in problem


def test_a_missing_file_is_named():
    problem = file_problem("/no/such/config.yaml")
    assert problem.startswith("config error: cannot read config file /no/such/config.yaml")


@pytest.mark.parametrize(
    ("path", "value", "line"),
    [
        ("train.lr", float("nan"), "config error at 'train.lr': nan is not a finite number"),
        ("train.temperature", float("inf"), "config error at 'train.temperature': inf is not"),
        ("dials.x", {"eps": float("-inf")}, "config error at 'dials.x.eps': -inf is not"),
    ],
)
def test_a_number_that_is_not_finite_is_refused(path, value, line):
    assert value_problem(_with(path, value), SCHEMA).startswith(line)


def test_an_alias_bomb_is_refused_from_the_file_and_a_few_aliases_are_fine(tmp_path):
    bomb = tmp_path / "bomb.yaml"
    lines = ["a: &a [x, x, x, x, x, x, x, x, x]"]
    lines += [f"{c}: &{c} [{', '.join([f'*{p}'] * 9)}]" for p, c in zip("abcdefghijkl",
                                                                      "bcdefghijklm", strict=True)]
    bomb.write_text("\n".join(lines) + "\n")
    assert len(bomb.read_bytes()) < 700
    assert file_problem(bomb) == (
        f"config error in {bomb}: 108 YAML aliases (*name); a config file may use at most 100 "
        "(more can expand exponentially: an alias bomb)"
    )
    fine = tmp_path / "fine.yaml"
    fine.write_text("base: &b {steps: 5}\ntrain: *b\n")
    assert file_problem(fine) is None

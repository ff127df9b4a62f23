"""tools/mutate.py: the equivalent-mutant check (each entry of docs/mutation-equivalents.md names,
by its diff, the mutant mutmut makes under that name now) and the test selection."""

from __future__ import annotations

import importlib.util
import sys

import pytest
from conftest import REPO

pytest.importorskip("mutmut", reason="mutmut is not installed (the 'test' extra)")

_spec = importlib.util.spec_from_file_location("mutate", REPO / "tools" / "mutate.py")
mutate = importlib.util.module_from_spec(_spec)
sys.modules["mutate"] = mutate
_spec.loader.exec_module(mutate)

TOY = "def scale(x, k):\n    y = x * k\n    return y + 1\n"
# mutmut numbers scale's mutants in order: y = None, x / k, then the return's y - 1, y + 2
ENTRIES = """# Equivalent mutants

## toy.py

- `grpo_dial.toy.x_scale__mutmut_3`: one less.
  ```diff
  -return y + 1
  +return y - 1
  ```
- `grpo_dial.toy.x_scale__mutmut_2`: a quotient.
  ```diff
  -y = x  *  k
  +y = x / k
  ```

Some text.
"""


@pytest.fixture
def root(tmp_path):
    (tmp_path / "src" / "grpo_dial").mkdir(parents=True)
    (tmp_path / "src" / "grpo_dial" / "toy.py").write_text(TOY)
    return tmp_path


def test_entries_parse_with_their_diffs():
    entries = mutate.equivalents(ENTRIES)
    assert entries == {
        "grpo_dial.toy.x_scale__mutmut_3": ("one less.", ("-return y + 1", "+return y - 1")),
        "grpo_dial.toy.x_scale__mutmut_2": ("a quotient.", ("-y = x * k", "+y = x / k")),
    }


def test_entries_that_name_their_mutants_pass(root):
    assert mutate.equivalent_problems(mutate.equivalents(ENTRIES), root) == []


def test_an_entry_whose_diff_no_longer_matches_is_reported(root):
    """A line added above shifts the numbers: _2 and _3 are now mutants of that line. Both
    entries are reported, each with the diff its name makes now, and none is excluded."""
    toy = root / "src" / "grpo_dial" / "toy.py"
    toy.write_text(TOY.replace("    y = x * k\n", "    x = x - 2\n    y = x * k\n"))
    problems = mutate.equivalent_problems(mutate.equivalents(ENTRIES), root)
    assert problems == [
        "grpo_dial.toy.x_scale__mutmut_2: mismatch, the entry's diff is -y = x * k +y = x / k but "
        "the mutant of that name is now -x = x - 2 +x = x + 2",
        "grpo_dial.toy.x_scale__mutmut_3: mismatch, the entry's diff is -return y + 1 "
        "+return y - 1 but the mutant of that name is now -x = x - 2 +x = x - 3",
    ]


def test_a_gone_mutant_or_module_or_a_missing_diff_is_reported(root):
    text = ENTRIES.replace("mutmut_3", "mutmut_9").replace(
        "- `grpo_dial.toy.x_scale__mutmut_2`: a quotient.",
        "- `grpo_dial.toy.x_scale__mutmut_1`: no diff.\n- `grpo_dial.gone.x_f__mutmut_1`: gone.",
    )
    problems = mutate.equivalent_problems(mutate.equivalents(text), root)
    assert problems == [
        "grpo_dial.gone.x_f__mutmut_1: stale, module src/grpo_dial/gone.py not found",
        "grpo_dial.toy.x_scale__mutmut_1: no ```diff block; it is now -y = x * k +y = None",
        "grpo_dial.toy.x_scale__mutmut_9: stale, mutmut makes no mutant of that name now",
    ]


def test_every_listed_equivalent_names_the_mutant_its_entry_describes():
    """docs/mutation-equivalents.md against the mutants mutmut makes of today's source."""
    entries = mutate.equivalents()
    assert len(entries) >= 40 and all(e.diff for e in entries.values())
    assert mutate.equivalent_problems(entries) == []


def test_core_modules_are_tested_by_the_engine_tests_too():
    """tests/engines (verl's own estimators against core's) is in the selection of the core
    modules it reaches, through the imports within core (advantage -> estimators -> engines)."""
    for module in ("engine_estimators", "engine_losses", "std_factor"):
        tests = mutate.tests_for(f"src/grpo_dial/core/{module}.py")
        assert "tests/engines/test_verl_equivalence.py" in tests
        assert "tests/core/test_advantage.py" in tests
    assert mutate.tests_for("src/grpo_dial/core/group_bias.py") == [
        "tests/core/test_group_bias.py",
        "tests/core/test_group_bias_mutants.py",
        "tests/core/test_group_bias_mutants_names.py",
    ]

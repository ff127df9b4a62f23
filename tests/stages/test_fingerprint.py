"""Each rule's source fingerprint (grpo_dial.stages.fingerprint), the `code` param that reruns a job
when the source it executes changes: on a copy of the package, an edit changes the fingerprints
of exactly the rules that run the edited file; a moved copy, the generic rule script and an
unrelated module change none."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from grpo_dial.stages.fingerprint import PACKAGE, closure, fingerprint
from grpo_dial.stages.registry import RULES


@pytest.fixture
def package(tmp_path):
    copy = tmp_path / "a" / "grpo_dial"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    return copy


def _prints(root: Path) -> dict[str, str]:
    return {rule: fingerprint(rule, root) for rule in RULES}


def _changed(root: Path, edit: str, text: str = "\n# an edit\n") -> set[str]:
    before = _prints(root)
    with open(root / edit, "a") as f:
        f.write(text)
    from grpo_dial.stages import fingerprint as fp

    fp._module_imports.cache_clear()
    fp._digest.cache_clear()
    after = _prints(root)
    return {rule for rule in RULES if before[rule] != after[rule]}


def test_a_figure_module_edit_reruns_that_figure_alone(package):
    assert _changed(package, "figures/dapo.py") == {"dapo_figure"}


def test_an_estimator_edit_reruns_the_trainer_and_every_rule_that_runs_the_advantage(package):
    changed = _changed(package, "core/advantage.py")
    assert {"train", "calibrate_lr", "simulate", "identity_check", "estimator_tables"} <= changed
    assert not {"dapo_figure", "theory_figures", "difficulty_figure", "download"} & changed
    assert changed == {r for r in RULES if package / "core/advantage.py" in closure(RULES[r],
                                                                                        package)}


def test_an_unrelated_module_edit_reruns_nothing(package):
    assert _changed(package, "tools/cli.py") == set()


def test_one_stage_of_a_module_is_apart_from_its_neighbours(package):
    """theory_figures and theory_tables share stages/theory.py: an edit inside one function
    changes that rule's fingerprint only."""
    path = package / "stages" / "theory.py"
    text = path.read_text()
    marker = "def theory_figures(input: Mapping, output: Mapping, params: Mapping) -> None:\n"
    assert marker in text
    before = _prints(package)
    path.write_text(text.replace(marker, marker + "    # an edit\n"))
    after = _prints(package)
    assert {r for r in RULES if before[r] != after[r]} == {"theory_figures"}


def test_a_moved_checkout_changes_no_fingerprint(package, tmp_path):
    moved = tmp_path / "b" / "elsewhere" / "grpo_dial"
    shutil.copytree(package, moved)
    assert _prints(moved) == _prints(package) == _prints(PACKAGE)


def test_the_generic_rule_script_is_in_no_fingerprint():
    for rule, stage in RULES.items():
        assert all(p.suffix == ".py" and PACKAGE in p.parents for p in closure(stage)), rule


def test_fingerprints_import_no_torch():
    code = ("import sys; from grpo_dial.stages.fingerprint import fingerprint; "
            "from grpo_dial.stages.registry import RULES; [fingerprint(r) for r in RULES]; "
            "assert 'torch' not in sys.modules")  # fmt: skip
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_an_unknown_stage_function_is_one_line():
    with pytest.raises(ValueError, match="^stage 'theory.no_such': no function no_such in"):
        closure("theory.no_such")


def test_every_stage_rule_carries_its_own_fingerprint():
    """Each rule that runs the stage script has `code=fingerprint("<its name>")` in its params."""
    import re

    rules = PACKAGE.parents[1] / "workflow" / "rules"
    seen = {}
    for path in sorted(rules.glob("*.smk")):
        for block in re.split(r"(?m)^(?=rule \w+:)", path.read_text())[1:]:
            name = re.match(r"rule (\w+):", block).group(1)
            if '"../scripts/stage.py"' in block:
                seen[name] = re.findall(r'code=fingerprint\("(\w+)"\)', block)
    assert set(seen) == set(RULES)
    assert {name: found for name, found in seen.items() if found != [name]} == {}


def test_a_checkpoint_of_other_code_is_not_resumed():
    """The train job's fingerprint is in its resume key: a checkpoint written by other source
    differs in `train.code`, so it is set aside (train.resume), never resumed."""
    from grpo_dial.train.config import TrainConfig
    from grpo_dial.train.resume import key_changes

    old, new = TrainConfig(code="aaaa").resume_key(), TrainConfig(code="bbbb").resume_key()
    assert key_changes({"config": old}, {"config": new}) == ["train.code: 'aaaa' -> 'bbbb'"]
    assert fingerprint("train") == fingerprint("train")  # what the job computes, stable


def test_the_stage_never_sees_the_code_param(tmp_path):
    """run_rule drops `code` (a rerun trigger, no setting) before the stage's params."""
    from types import SimpleNamespace

    from grpo_dial.stages.run import run_rule

    seen = {}

    def stage(input, output, params):
        seen.update(params)

    class Params(dict):
        pass

    smk = SimpleNamespace(log=[str(tmp_path / "x.log")], input={}, output={}, threads=1,
                          params=Params(code="abc", n=3))  # fmt: skip
    run_rule(stage, smk)
    assert seen == {"n": 3, "threads": 1}


def test_the_closure_is_read_under_the_given_root(package):
    """A module only the copy has, imported by the copy's figure module (`from pkg import mod`
    and `import pkg.mod` forms), is in the copy's closure, with the packages' __init__ files."""
    (package / "figures" / "extra_a.py").write_text("X = 1\n")
    (package / "figures" / "extra_b.py").write_text("Y = 2\n")
    with open(package / "figures" / "dapo.py", "a") as f:
        f.write("\nfrom grpo_dial.figures import extra_a  # noqa\n"
                "import grpo_dial.figures.extra_b  # noqa\n")
    files = closure(RULES["dapo_figure"], package)
    assert {package / "figures" / "extra_a.py", package / "figures" / "extra_b.py"} <= set(files)
    assert package / "figures" / "__init__.py" in files and package / "__init__.py" in files
    assert package / "stages" / "dapo.py" not in files  # the stage module counts by its parts
    assert not (set(closure(RULES["dapo_figure"])) & {p for p in files if "extra" in p.name})


def test_a_private_helper_of_a_stage_module_is_in_its_rules_fingerprints(package):
    """aware.smk's stages share stages/aware.py's private helpers: an edit of one changes the
    fingerprints of the rules of that module, and of no other module's rule."""
    path = package / "stages" / "aware.py"
    text = path.read_text()
    marker = "def _threads(params: Mapping) -> None:\n"
    assert marker in text
    before = _prints(package)
    path.write_text(text.replace(marker, marker + "    # an edit\n"))
    after = _prints(package)
    changed = {r for r in RULES if before[r] != after[r]}
    assert "aware_sweep_cell" in changed and changed <= {r for r, s in RULES.items()
                                                           if s.startswith("aware.")}  # fmt: skip
    assert len(after["train"]) == 16 and all(c in "0123456789abcdef" for c in after["train"])


def test_a_missing_stage_module_is_one_line():
    with pytest.raises(ValueError, match="^stage module grpo_dial.stages.nowhere not found$"):
        closure("nowhere.f")

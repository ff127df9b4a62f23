"""core.arm_names: one source of display names, the registry's labels with the table of the
arms that are no estimator, read without torch; a key named twice differently is refused."""

import subprocess
import sys

import pytest

from grpo_dial.core.arm_names import ARM_NAMES, arm_name, display_names
from grpo_dial.core.estimators import ESTIMATORS, register_estimator, unregister_estimator
from grpo_dial.core.settings import Setting


def test_display_names_are_the_table_and_every_registered_label():
    names = display_names()
    assert {k: names[k] for k in ARM_NAMES} == ARM_NAMES
    assert {e.name: names[e.name] for e in ESTIMATORS.values()} == {
        e.name: e.label for e in ESTIMATORS.values()
    }
    assert names["rloo"] == "RLOO" and names["stratified_grpo"] == "Stratified GRPO"
    assert not set(ARM_NAMES) & set(ESTIMATORS)  # one source: no label stated twice


def test_a_registered_label_is_shown_and_gone_with_its_entry():
    fields = {"toy_named_on": Setting(False, "h", kind=bool)}
    register_estimator("toy_named", label="Toy named", kind="advantage", fields=fields,
                       active=lambda d: d.toy_named_on)(lambda *a: None)  # fmt: skip
    try:
        assert display_names()["toy_named"] == "Toy named" == arm_name("toy_named")
    finally:
        unregister_estimator("toy_named")
    assert arm_name("toy_named") == "toy_named"  # unnamed: the config's key


def test_an_estimator_named_like_a_listed_arm_with_another_label_is_refused():
    fields = {"toy_clash_on": Setting(False, "h", kind=bool)}
    register_estimator("grpo", label="Other", kind="advantage", fields=fields,
                       active=lambda d: d.toy_clash_on)(lambda *a: None)  # fmt: skip
    try:
        with pytest.raises(ValueError, match="^arm 'grpo' is named 'GRPO' and 'Other'$"):
            display_names()
    finally:
        unregister_estimator("grpo")


def test_a_figure_process_reads_every_label_without_torch():
    code = ("import sys; from grpo_dial.core.arm_names import display_names; "
            "n = display_names(); assert n['gspo'] == 'GSPO', n; "
            "assert 'torch' not in sys.modules, 'torch imported'")  # fmt: skip
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr

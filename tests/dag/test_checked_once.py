"""At DAG build each field of each arm is checked once: the Dial's, the Allocation's and the
backend, counted on Setting.check while the config's one door (grpo_dial.dag.plan.open_plan, what
workflow/rules/common.smk calls) plans the embedded default."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import yaml

from grpo_dial.core import settings
from grpo_dial.core.allocation import ALLOCATION_SETTINGS
from grpo_dial.core.dial import dial_settings
from grpo_dial.dag import arms as dag_arms
from grpo_dial.dag.plan import open_plan

ROOT = Path(__file__).resolve().parents[2]


def test_each_field_of_each_arm_is_checked_once(tmp_path, monkeypatch):
    config_file = ROOT / "config" / "config.yaml"
    config = yaml.safe_load(config_file.read_text())
    config["results_dir"] = str(tmp_path / "results")
    config["resources_dir"] = str(tmp_path / "resources")
    checks: Counter = Counter()  # (arm or None, field) -> Setting.check calls
    reading = [None]  # the arm read_arm is reading, None outside it
    check, read_arm = settings.Setting.check, dag_arms.read_arm

    def counted_check(self, name, value):
        checks[reading[0], name] += 1
        return check(self, name, value)

    def reading_arm(spec, *args, **kwargs):
        reading[0] = next(name for name, entry in config["dials"].items() if entry is spec)
        try:
            return read_arm(spec, *args, **kwargs)
        finally:
            reading[0] = None

    monkeypatch.setattr(settings.Setting, "check", counted_check)
    monkeypatch.setattr(dag_arms, "read_arm", reading_arm)
    plan = open_plan(config, [config_file], ROOT, tmp_path)

    fields = [*dial_settings(), *(n for n in ALLOCATION_SETTINGS), "backend"]
    assert len(plan.arms) >= 3
    for arm in plan.arms:
        assert {name: checks[arm, name] for name in fields} == dict.fromkeys(fields, 1), arm
    assert {key for key in checks if key[0] is not None} == {
        (arm, name) for arm in plan.arms for name in fields
    }
    # outside the arms: train.allocation once on its own (blamed on itself, not an arm), and no
    # Dial field or backend is checked again
    outside = {name: n for (arm, name), n in checks.items() if arm is None}
    assert not set(outside) & {*dial_settings(), "backend"}, outside
    assert all(n == 1 for n in outside.values()), outside

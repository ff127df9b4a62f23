"""The one table of rules and stages: every rule of workflow/rules runs the generic script and
has exactly one stage there, every stage exists, and an unknown rule lists the valid ones."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from grpo_dial.stages.registry import RULES, stage_for

RULES_DIR = Path(__file__).resolve().parents[2] / "workflow" / "rules"


def _rules() -> dict[str, str]:
    """Rule name -> the script its `script:` directive names, read from the .smk files."""
    found = {}
    for path in sorted(RULES_DIR.glob("*.smk")):
        text = path.read_text()
        for match in re.finditer(r"^rule (\w+):(.*?)(?=^rule |\Z)", text, re.S | re.M):
            script = re.search(r'script:\s*"([^"]+)"', match.group(2))
            if script:
                found[match.group(1)] = script.group(1)
    return found


def test_every_rule_runs_the_one_stage_script_and_has_a_stage():
    rules = _rules()
    assert set(rules.values()) == {"../scripts/stage.py"}
    assert set(rules) == set(RULES)
    for rule in RULES:
        assert callable(stage_for(rule)), rule


def test_an_unknown_rule_lists_the_valid_ones():
    with pytest.raises(ValueError, match=r"unknown rule 'trian'; valid rules: .*train"):
        stage_for("trian")

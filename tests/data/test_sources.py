"""Hub-id / URL / local-path detection: the one copy of the rule, importable without torch."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from grpo_dial.data.sources import HUB_DEFAULTS, has_data_suffix, is_hub_id, is_remote, is_url

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    ("text", "hub"),
    [
        ("openai/gsm8k", True),
        ("HuggingFaceH4/MATH-500", True),
        ("open-r1/Big-Math-RL-Verified-Processed", True),
        ("Qwen/Qwen2.5-Math-1.5B", True),
        ("gsm8k", False),  # no owner
        ("data/missing/bigmath.parquet", False),  # two slashes: a path
        ("/abs/path", False),
        ("./rel/x", False),
        ("-bad/name", False),
        ("https://host/x.parquet", False),
    ],
)
def test_hub_id_shape(text: str, hub: bool) -> None:
    assert is_hub_id(text) is hub
    assert is_remote(text) is (hub or text.startswith("https://"))


def test_urls_suffixes_and_defaults() -> None:
    assert is_url("http://x/y") and is_url("https://x/y") and not is_url("ftp://x/y")
    assert has_data_suffix("owner/name.JSONL") and not has_data_suffix("owner/name")
    assert all(is_hub_id(hub) for hub, _ in HUB_DEFAULTS.values())


def test_importable_without_heavy_packages() -> None:
    code = (
        "import sys, grpo_dial.data.sources; "
        "print(sorted(m for m in ('torch', 'pandas', 'pyarrow') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_workflow_uses_this_rule_not_a_copy() -> None:
    common = (REPO / "workflow" / "rules" / "common.smk").read_text()
    assert "from grpo_dial.data.sources import" in common
    assert "HUB_ID = re.compile" not in common
    model = (REPO / "src" / "grpo_dial" / "policy" / "model.py").read_text()
    assert "from grpo_dial.data.sources import is_hub_id" in model

"""Hub-id / URL / local-path detection: the one copy of the rule, importable without torch."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from grpo_dial.data.sources import (
    HUB_DEFAULTS,
    OFFLINE_VARIABLES,
    has_data_suffix,
    hub_failure,
    hub_model_id,
    hub_offline,
    is_hub_id,
    is_remote,
    is_url,
    missing_path,
)

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
    assert "from grpo_dial.data.sources import check_hub_id" in model


def test_missing_paths_say_how_to_name_the_hub() -> None:
    assert missing_path("openai/gsm8k", "file") == (
        "file not found: openai/gsm8k (a local path; to read it from the Hugging Face hub, "
        "write hub: openai/gsm8k)"
    )
    assert missing_path("data/nothere.parquet", "file") == "file not found: data/nothere.parquet"
    assert missing_path("o/tok", "tokenizer", None) == "tokenizer not found: o/tok"  # no hub there
    assert missing_path("o/m", "policy", "base: hub:").endswith("write base: hub:o/m)")
    assert "URLs are not fetched" in missing_path("https://x/y.parquet", "file")
    assert hub_model_id("hub:Qwen/Qwen2.5-Math-1.5B") == "Qwen/Qwen2.5-Math-1.5B"
    assert hub_model_id("Qwen/Qwen2.5-Math-1.5B") is None  # a local directory, by its name


@pytest.mark.parametrize("value", ["1", "true", "YES", "on"])
def test_offline_variables_are_honoured(monkeypatch, value: str) -> None:
    for name in OFFLINE_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    assert hub_offline() is None
    monkeypatch.setenv("HF_HUB_OFFLINE", value)
    assert hub_offline() == "HF_HUB_OFFLINE"
    message = hub_failure("openai/gsm8k", OSError("not in cache"))
    assert "HF_HUB_OFFLINE is set: only the local Hugging Face cache is read" in message


def test_remote_code_is_never_enabled() -> None:
    """No hub call asks for remote code: the string does not occur in the package or workflow."""
    for root in ("src", "workflow"):
        for path in (REPO / root).rglob("*"):
            if path.suffix in (".py", ".smk", ".yaml") or path.name == "Snakefile":
                assert "trust_remote_code" not in path.read_text(), path


def test_the_policy_reads_the_hub_only_when_named(monkeypatch, tmp_path) -> None:
    """load_policy: hub:<id> goes to from_pretrained (no remote code); a bare id is a local path."""
    pytest.importorskip("transformers")
    from grpo_dial.policy import model as policy_model

    calls = []

    def refuse(name, **kwargs):
        calls.append((name, kwargs))
        raise OSError("no network here")

    monkeypatch.setattr(policy_model.AutoTokenizer, "from_pretrained", refuse)
    with pytest.raises(ValueError, match="policy could not load hub id 'o/model': OSError"):
        policy_model.load_policy("hub:o/model")
    assert calls == [("o/model", {})]  # nothing asks for remote code
    with pytest.raises(ValueError) as err:
        policy_model.load_policy("o/model")
    assert "policy directory not found: o/model" in str(err.value)
    assert "write base: hub:o/model" in str(err.value) and len(calls) == 1

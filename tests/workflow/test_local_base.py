"""model.base as a local directory (a saved Hugging Face model): every policy job takes the
directory as its model input, and rule estimate_pass_rates loads it (it used to get an empty
input and fail with "could not load hub id ''")."""

from __future__ import annotations

import re

import pandas as pd
import pytest
import yaml
from conftest import REPO
from test_workflow import snakemake

from grpo_dial.data.tasks import get_task
from grpo_dial.policy.model import PolicySpec, build_char_tokenizer, build_tiny_llama, save_policy

SPEC = PolicySpec(n_layers=1, hidden_size=32, n_heads=2, intermediate_size=64)


def job_inputs(stdout: str, rule: str) -> list[str]:
    """The `input:` paths of every job of `rule` in a dry run's output."""
    blocks = re.split(r"\n(?=(?:local)?rule \w+:)", stdout)
    return [
        path.strip()
        for block in blocks
        if re.match(rf"(?:local)?rule {rule}:", block.strip())
        for line in block.splitlines()
        if line.strip().startswith("input:")
        for path in line.split(":", 1)[1].split(",")
    ]


@pytest.mark.workflow
def test_a_local_model_directory_is_the_base_of_the_policy_jobs(tmp_path):
    config = yaml.safe_load((REPO / "config" / "smoke.yaml").read_text())
    task = get_task(config["task"]["name"], **config["task"]["options"])
    tokenizer = build_char_tokenizer(task.alphabet)
    base = tmp_path / "my_base"
    save_policy(build_tiny_llama(SPEC, tokenizer, seed=0), tokenizer, base)
    results = tmp_path / "results"
    config.update(results_dir=str(results))
    config["model"]["base"] = str(base)
    config["pass_rates"].update(pool=4, samples=2, max_new_tokens=8)

    dry = snakemake(tmp_path, config, "-n")
    assert dry.returncode == 0, dry.stderr[-3000:]
    for rule in ("estimate_pass_rates", "calibrate_lr", "train"):
        assert str(base) in job_inputs(dry.stdout, rule), rule
    assert "warm_start" not in dry.stdout and "convert_smollm" not in dry.stdout

    table = results / "passrates" / "base_policy.parquet"
    run = snakemake(tmp_path, config, str(table))
    log = results / "logs" / "policy" / "estimate_pass_rates.log"
    assert run.returncode == 0, log.read_text()[-3000:] if log.exists() else run.stderr[-3000:]
    assert len(pd.read_parquet(table)) == 4

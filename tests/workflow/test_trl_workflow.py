"""The smoke chain with the arms on the trl backend (TRL's GRPOTrainer): the own backend's
tables, decomposition, training figures, summary.md and `snakemake --report`, and TRL's
advantages in the responses."""

from __future__ import annotations

import base64
import re
import subprocess
from pathlib import Path

import pandas as pd
import pytest
import yaml
from conftest import REPO
from test_policy_workflow import smoke_config
from test_workflow import SNAKEMAKE, snakemake

from grpo_dial.core.arm_names import arm_name

TRL = {"std_ddof": 1, "eps": 0.0001, "backend": "trl"}
DIALS = {  # GRPO, Dr. GRPO and DAPO's loss on TRL (DAPO without its refill, which TRL lacks)
    "grpo": {"preset": "grpo", **TRL},
    "dr_grpo": {"preset": "dr_grpo", "backend": "trl"},
    "dapo": {"preset": "dapo", "silent": "keep", **TRL},
    # an own arm beside them in one run (the default's adaptive arm, which TRL cannot express)
    "grpo_adaptive": {"preset": "grpo", "group_size": "adaptive", "backend": "own"},
    # the default's two single-factor arms are left out (this config replaces `dials`): their
    # translation is tested in tests/backends/test_trl_config.py and config/trl.yaml's dry run
}
FIGURES = ("length_curves", "decomposition", "accuracy_length", "silent_training",
           "identity_training")  # fmt: skip
ON_TRL = [d for d, spec in DIALS.items() if spec and spec["backend"] == "trl"]
ARMS = [d for d, spec in DIALS.items() if spec]


def tiny_base(results: Path, spec: dict) -> None:
    """The smoke spec's Llama over the arithmetic alphabet, untrained, where rule warm_start
    writes it (so the chain starts from the pass rates)."""
    from grpo_dial.data.tasks.arithmetic import ArithmeticTask
    from grpo_dial.policy.model import (
        PolicySpec,
        build_char_tokenizer,
        build_tiny_llama,
        save_policy,
    )

    tokenizer = build_char_tokenizer(ArithmeticTask().alphabet)
    model = build_tiny_llama(PolicySpec(**spec), tokenizer, seed=0)
    save_policy(model, tokenizer, results / "policy" / "base")
    (results / "policy" / "warm_start_loss.csv").write_text("step,loss\n")


def embedded(html: str, filename: str) -> bytes:
    """The bytes of result `filename` as the self-contained report embeds them (a base64 data
    URI in its results table)."""
    start = html.index(f'"filename": "{filename}"')
    uri = re.compile(r'"data_uri": "data:[^"]*?;base64,([^"]*)"').search(html, start)
    assert uri is not None, filename
    return base64.b64decode(uri.group(1))


@pytest.mark.slow
@pytest.mark.workflow
def test_smoke_chain_on_the_trl_backend_writes_the_own_backends_outputs(tmp_path):
    pytest.importorskip("trl")
    results = tmp_path / "results"
    config = smoke_config(results)
    tiny_base(results, config["model"]["spec"])
    config["train"]["lr_match"] = {"enabled": False, "reference": "grpo"}
    config["dials"] = DIALS
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(config))
    figures = [results / "figures" / f"{name}.png" for name in FIGURES]
    front = results / "summary.md"  # the front page: its inputs bring the analysis half too
    targets = [str(p) for p in (results / "decompose" / "summary.csv", *figures, front)]
    report = tmp_path / "report.html"

    def chain(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [*SNAKEMAKE, "--snakefile", str(REPO / "Snakefile"), "--directory", str(tmp_path),
             "--configfile", str(tmp_path / "config.yaml"), "--cores", "2", *args, *targets],
            capture_output=True, text=True, timeout=3600,
        )  # fmt: skip

    done = chain()
    assert done.returncode == 0, done.stderr[-4000:]
    for dial in ON_TRL:
        spec = DIALS[dial]
        run = results / "train" / dial / "seed0"
        steps = pd.read_parquet(run / "steps.parquet")
        assert list(steps["step"]) == list(range(1, config["train"]["steps"] + 1))
        assert steps["grad_norm"].notna().all() and steps["lr"].gt(0).all()
        responses = pd.read_parquet(run / "responses.parquet")
        g = config["train"]["group_size"]
        assert len(responses) == config["train"]["steps"] * config["train"]["prompts_per_step"] * g
        # TRL's logged advantages: zero mean per group, zero in silent groups
        by_group = responses.groupby(["step", "group"])["advantage"]
        assert by_group.sum().abs().max() < 1e-5
        silent = responses["k"].isin([0, g])
        assert (responses.loc[silent, "advantage"] == 0).all()
        if spec["preset"] == "dr_grpo":  # A = r - mean_g
            expected = responses["reward"] - responses["k"] / g
            assert responses["advantage"].to_numpy() == pytest.approx(expected, abs=1e-6)
        evals = pd.read_parquet(run / "evals.parquet")
        assert {0, config["train"]["steps"]} <= set(evals["step"])
        assert (run / "final" / "config.json").exists()
        assert (results / "checkpoints" / dial / "seed0" / "trl" / "run_key.json").exists()
    summary = pd.read_csv(results / "decompose" / "summary.csv")
    assert sorted(summary["dial"]) == sorted(ARMS)
    for figure in figures:
        assert figure.stat().st_size > 10_000, figure

    # the front page: a row per arm (trl and own) in the RL runs' tables. (The untrained tiny
    # base never answers right, so every group is silent and the identity section is absent:
    # tests/external/test_trl_identity.py checks the trl identity table on a task it can solve.)
    text = front.read_text()
    sections = ("RL runs: accuracy and length by correctness", "Length pressure in the RL runs")
    for section in sections:
        assert f"## {section}" in text, section
    for dial in ARMS:
        assert f"| {arm_name(dial)} | 1 |" in text, dial  # arm, seeds
        assert f"| {arm_name(dial)} | 0 |" in text, dial  # arm, seed 0

    # the report: the figures, the training table and the front page, with their captions
    made = chain("--report", str(report))
    assert made.returncode == 0, made.stderr[-2000:]
    html = report.read_text(errors="replace")
    for name in ("decomposition.png", "identity_training.png", "summary.md", "summary.csv"):
        assert name in html, name
    assert "split exactly" in html  # the decomposition's caption
    assert embedded(html, "summary.md") == front.read_bytes()  # with the trl arms' rows


@pytest.mark.workflow
def test_a_dial_trl_cannot_express_fails_the_dry_run_in_one_line(tmp_path):
    config = smoke_config(tmp_path / "results")
    config["dials"] = {"grpo": {"preset": "grpo", "backend": "trl"}}  # population std
    done = snakemake(tmp_path, config, "-n")
    assert done.returncode != 0
    lines = [x for x in (done.stderr + done.stdout).splitlines() if "config error" in x]
    assert lines == [
        "config error at 'dials.grpo.std_ddof': the trl backend cannot train std_ddof = 0: "
        "TRL fixes the sample std (std_ddof 1) (backend: own can; config/trl.yaml restates the "
        "default's arms for TRL)"
    ]

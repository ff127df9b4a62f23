"""config/engines_lm.yaml, the language-model dial matrix with the engines' estimators: it
resolves in a dry run on top of the embedded default, with every engine preset as a training
arm for each seed and the engines' arms in the two simulations."""

from __future__ import annotations

import subprocess

import yaml
from test_workflow import REPO, SNAKEMAKE, planned_jobs

from grpo_dial.core.dial import PRESETS

OVERLAY = REPO / "config" / "engines_lm.yaml"
ENGINE_PRESETS = {"rloo", "opo", "grpo_passk", "batch_std", "gpg", "reinforce_pp_baseline",
                  "reinforce_pp", "gdpo", "gspo", "luspo", "bnpo"}  # fmt: skip


def test_engines_overlay_resolves_with_every_engine_preset(tmp_path):
    overlay = yaml.safe_load(OVERLAY.read_text())
    dials = {k: v for k, v in overlay["dials"].items() if v is not None}
    assert {v["preset"] for v in dials.values()} == ENGINE_PRESETS <= set(PRESETS)
    result = subprocess.run(
        [*SNAKEMAKE, "-n", "--forceall", "--cores", "1", "--configfile",
         str(REPO / "config" / "config.yaml"), str(OVERLAY),
         "--config", f"results_dir={tmp_path / 'results'}"],
        cwd=REPO, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    jobs = planned_jobs(result.stdout)
    kept = 3  # grpo, dr_grpo, dapo of the default; its other three are switched off
    assert jobs["train"] == (len(dials) + kept) * len(overlay["train"]["seeds"])
    assert jobs["simulate"] == 1 and jobs["length_bias"] == 1 and jobs["estimator_tables"] == 1
    assert "rule train:" in result.stdout and "wildcards: dial=gdpo, seed=2" in result.stdout

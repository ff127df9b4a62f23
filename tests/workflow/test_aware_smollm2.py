"""The aware tail on SmolLM2-135M (config/length_aware_smollm2.yaml, its CPU pilot
config/length_aware_smollm2_pilot.yaml): the overlays plan a warm-started pretrained base and
AdamW cells; on CPU the whole chain, from the packaged model's conversion to the dose table,
runs at a few steps and its tables say what they should."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from conftest import REPO
from smollm_fixtures import needs_smollm
from snakemake.utils import update_config
from test_workflow import planned_jobs, snakemake

OVERLAYS = ("length_aware.yaml", "length_aware_sweep.yaml", "length_aware_smollm2.yaml")
TOY = {  # every size of the pilot cut to what shows the chain runs
    "train": {"seeds": [0], "steps": 2, "prompts_per_step": 2, "group_size": 4},
    "warm_start": {"steps": 2, "batch_size": 4, "corpus_size": 32},
    "channel": {"prompts": 2, "samples": 4},
    "aware_sweep": {"kernel_rows": 8, "probe_batches": 2},
    "pass_rates": {"pool": 8},
}


def _config(tmp_path: Path, *extra: str | dict) -> dict:
    config: dict = {}
    for item in (*OVERLAYS, *extra):  # merged as snakemake merges --configfile overlays
        path = REPO / "config" / str(item)
        part = item if isinstance(item, dict) else yaml.safe_load(path.read_text())
        update_config(config, part)
    config["dials"] = {k: v for k, v in config["dials"].items() if v is not None}
    config["results_dir"] = str(tmp_path / "results")
    return config


def test_the_overlay_plans_a_warm_started_smollm2_and_adamw_cells(tmp_path: Path):
    config = _config(tmp_path)
    assert config["task"]["options"]["score_truncated"] is True  # the aware options are kept
    run = snakemake(tmp_path, config, "-n", "--replace-workflow-config", "aware_dose_figure")
    assert run.returncode == 0, run.stderr[-2000:]
    jobs = planned_jobs(run.stdout)
    assert jobs["convert_smollm"] == 1 and jobs["warm_start"] == 1
    assert jobs["aware_sweep_cell"] == 3 * 4  # AdamW x (a0, a40, a80) x four arms
    assert jobs["aware_frozen_cell"] == jobs["aware_probe"] == 1
    assert "models/smollm2-135m-instruct" in run.stdout.split("rule warm_start:")[1].split(
        "output:")[0]  # the warm start reads the converted model  # fmt: skip
    blocks = run.stdout.split("\nrule ")[1:]  # each planned job's block (localrule: rule files')
    model_jobs = [b for b in blocks if b.startswith(("aware_sweep_cell", "aware_frozen_cell",
                                                      "aware_probe", "aware_base"))]  # fmt: skip
    assert len(model_jobs) == 12 + 3 and all("gpu=1" in b for b in model_jobs)  # one at a time
    pilot = _config(tmp_path, "length_aware_smollm2_pilot.yaml")
    run = snakemake(tmp_path, pilot, "-n", "--replace-workflow-config", "aware_dose_figure")
    assert run.returncode == 0, run.stderr[-2000:]
    assert planned_jobs(run.stdout)["aware_sweep_cell"] == 2  # GRPO and Dr. GRPO at a80


def test_without_the_pretrained_warm_start_the_runs_start_from_the_converted_model(tmp_path):
    config = _config(tmp_path, {"warm_start": {"pretrained": False}})
    run = snakemake(tmp_path, config, "-n", "--replace-workflow-config", "aware_dose_figure")
    assert run.returncode == 0, run.stderr[-2000:]
    jobs = planned_jobs(run.stdout)
    assert "warm_start" not in jobs and jobs["convert_smollm"] == 1
    config["warm_start"]["pretrained"] = "yes"
    run = snakemake(tmp_path, config, "-n", "--replace-workflow-config", "aware_dose_figure")
    lines = [x for x in (run.stdout + run.stderr).splitlines() if "config error" in x]
    assert run.returncode != 0 and len(lines) == 1, lines
    assert lines[0].startswith("config error at 'warm_start.pretrained'"), lines


@pytest.mark.slow  # about 3 minutes on 2 idle cores: make test-all (CI) runs it
@needs_smollm
def test_the_pilot_runs_on_cpu_from_conversion_to_the_dose_table(tmp_path: Path):
    config = _config(tmp_path, "length_aware_smollm2_pilot.yaml", TOY)
    run = snakemake(tmp_path, config, "--replace-workflow-config", "aware_dose_figure")
    assert run.returncode == 0, run.stderr[-3000:]
    results = tmp_path / "results"
    base = json.loads((results / "policy" / "base" / "config.json").read_text())
    assert (base["num_hidden_layers"], base["hidden_size"], base["vocab_size"]) == (30, 576, 49152)
    loss = pd.read_csv(results / "policy" / "warm_start_loss.csv")
    assert loss["step"].tolist() == [0, 1] and np.isfinite(loss["loss"]).all()
    responses = pd.read_parquet(results / "aware" / "base_responses.parquet")
    assert len(responses) == 2 * 4 * 4  # channel prompts x samples x the base's four rounds
    assert responses["prefix"].str[0].isin(["=", "~"]).all()
    tail = responses["tokens"] - responses["prefix"].str.len() - (~responses["truncated"])
    assert (tail >= 0).all()
    kernel = pd.read_csv(results / "aware" / "kernel.csv").set_index("weights")
    rates = pd.read_csv(results / "aware_sweep" / "rates.csv").iloc[0]
    l1 = (kernel.loc["all", "l1_estimate"] + kernel.loc["all", "l1_compute"]) / 2
    assert rates["lr_adam"] == pytest.approx(rates["adam_step"] / l1, rel=1e-9)
    for arm in ("grpo", "dr_grpo"):
        cell = pd.read_parquet(results / "aware_sweep" / "adamw" / "a80" / f"{arm}.parquet")
        assert cell["step"].tolist() == [1, 2] and (cell["seed"] == 0).all()
        assert cell["n"].tolist() == [2 * 4, 2 * 4]  # prompts_per_step x G responses a step
    dose = pd.read_csv(results / "aware_sweep" / "dose.csv")
    cells = dose[dose["quantity"] == "contrast_tokens"].set_index("dial")
    assert set(cells.index) == {"grpo", "dr_grpo", "tail_frozen"}
    assert (cells["n_seeds"] == 1).all()
    assert (cells.loc[["grpo", "dr_grpo"], "level"] == "a80").all()
    assert (results / "figures" / "aware_dose.png").stat().st_size > 0

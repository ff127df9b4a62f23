"""Glue between the config and the rules: one call into grpo_dial.dag, then the target lists.

Every check lives in grpo_dial.dag (standard library, numpy, pandas; no torch at parse time):
a config problem stops the DAG build with one line (a WorkflowError), before any job runs.
"""

import os
import re
import sys
import time
from pathlib import Path

REPO = Path(workflow.basedir).resolve()
sys.path.insert(0, str(REPO / "src"))  # the repository's own source first
from grpo_dial.dag import ConfigError  # noqa: E402
from grpo_dial.stages.fingerprint import fingerprint  # noqa: E402 (ast only: no torch)
from grpo_dial.dag.inputs import POLICY_TABLE  # noqa: E402
from grpo_dial.dag.plan import (  # noqa: E402
    LENGTH_BIAS_WORKFLOW_KEYS,
    PASSRATE_WORKFLOW_KEYS,
    TRAIN_WORKFLOW_KEYS,
    open_plan,
    section,
)
from grpo_dial.dag.provenance import STARTED, run_record  # noqa: E402
from grpo_dial.dag.resources import gpu_jobs  # noqa: E402
from grpo_dial.data.sources import OFFLINE_VARIABLES  # noqa: E402
from grpo_dial.tools.cluster_check import install as fit_to_cluster  # noqa: E402

fit_to_cluster(workflow, WorkflowError)  # cluster profile: threads = cpus_per_task; jobs fit sinfo

try:  # the one door: files and values checked, the schema read once and validated, the Plan
    PLAN = open_plan(config, workflow.configfiles, REPO, Path.cwd())
except ConfigError as error:
    raise WorkflowError(str(error)) from None

# What decides the results (the summary's params: a changed config reruns it); the start time
# goes to the jobs through the environment, never through params, so it reruns nothing.
SETTINGS = workflow.config_settings  # the command line's --configfile files and --config values
PROVENANCE = run_record(config, workflow.configfiles, SETTINGS.config, REPO, SETTINGS.configfiles)
os.environ.setdefault(STARTED, time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))

RESULTS = PLAN.inputs.results
FIG = f"{RESULTS}/figures"  # every figure rule's folder
RESOURCES = PLAN.inputs.resources
OFFLINE = PLAN.inputs.offline
if OFFLINE:  # every job inherits these (a cluster job re-reads this file and sets them again)
    os.environ.update({name: "1" for name in OFFLINE_VARIABLES})
PUBLIC = PLAN.inputs.public
PUBLIC_FILES = PLAN.inputs.public_files  # rule download's files
TABLES = PLAN.tables
SIM_TABLES = PLAN.sim_tables
LENGTH_BIAS_TABLES = PLAN.length_bias_tables
LENGTH_BIAS_KEYS = list(section(config["length_bias"], LENGTH_BIAS_WORKFLOW_KEYS))
POLICY_ENABLED = PLAN.policy_enabled
DAPO = config["dapo_consistency"]
DAPO_CURVE = PLAN.dapo_curve
BASE_MODEL = PLAN.base_model  # its directory (built or local) as a job input; [] for a hub id
WARM_START_FROM = PLAN.warm_start_from  # the pretrained model rule warm_start tunes, or None
TASK = PLAN.task
TASK_INPUTS = PLAN.task_inputs
ARM_FIELDS = PLAN.arm_fields  # arm -> {dial: Dial fields, allocation: Allocation fields}
DIAL_FIELDS = {name: fields["dial"] for name, fields in ARM_FIELDS.items()}
BACKENDS = PLAN.backends  # arm -> own | trl
RUNS = PLAN.runs
ALLOCATION_PAIRS = PLAN.allocation_pairs
ALLOCATION_RUNS = PLAN.allocation_runs
REAL_LENGTH_INPUTS = PLAN.real_length_inputs
RUNS_EXTERNAL = PLAN.runs_external
LR_MATCH = config["train"]["lr_match"]
TRAINING_FIGURES = [
    "length_curves", "decomposition", "accuracy_length", "silent_training", "identity_training"
] + (["estimators_training"] if PLAN.stateful_arms else [])
CHANNEL_PARAMS = {
    "task": config["task"],
    "channel": config["channel"],
    "device": config["model"]["device"],
    "pool": config["pass_rates"]["pool"],
    "pool_seed": config["pass_rates"]["seed"],
    "max_new_tokens": config["train"]["max_new_tokens"],
    "threads": config["train"]["threads"],
}

# One GPU job per visible GPU under every local profile, unless `resources: gpu=N` was given.
GPU = 1 if config["model"]["device"].startswith("cuda") else 0
if workflow.global_resources.get("gpu").value is None:
    workflow.register_resource("gpu", gpu_jobs(GPU))

wildcard_constraints:
    table="|".join(re.escape(name) for name in [*config["passrate_tables"], POLICY_TABLE]),
    dial="|".join(re.escape(name) for name in PLAN.arms) or "NONE",
    seed=r"\d+",
    run="|".join(re.escape(name) for name in config["runs"]) or "NONE",

CONFIGURED_TABLE_PATTERN = "|".join(re.escape(name) for name in config["passrate_tables"]) or "NONE"


def train_params(wildcards):
    """The TrainConfig fields (every train key but the workflow-only ones)."""
    return section(config["train"], TRAIN_WORKFLOW_KEYS)


def train_inputs(wildcards):
    """Base model, its pass rates and, with lr matching, this arm's and the reference's calibration."""
    inputs = {"passrates": f"{RESULTS}/passrates/{POLICY_TABLE}.parquet", **TASK_INPUTS}
    if BASE_MODEL:
        inputs["model"] = BASE_MODEL
    if LR_MATCH["enabled"]:
        inputs["calibration"] = f"{RESULTS}/train/{wildcards.dial}/lr_calibration.csv"
        inputs["reference"] = f"{RESULTS}/train/{LR_MATCH['reference']}/lr_calibration.csv"
    return inputs


def passrate_spec(wildcards):
    """The loader keyword arguments of one pass-rate table, but its file (the job's input)."""
    return section(config["passrate_tables"][wildcards.table], PASSRATE_WORKFLOW_KEYS)


def passrate_input(wildcards):
    path = PLAN.table_inputs[wildcards.table]
    return {"source": path} if path else {}


def run_files(name):
    """One file per (dial, seed) run, in the order of RUNS."""
    return [f"{RESULTS}/train/{dial}/seed{seed}/{name}" for dial, seed in RUNS]


def decomposition_files(name):
    return [f"{RESULTS}/decompose/{dial}/seed{seed}/{name}" for dial, seed in RUNS]


def allocation_files(name):
    return [f"{RESULTS}/train/{dial}/seed{seed}/{name}" for dial, seed in ALLOCATION_RUNS]


def run_spec(wildcards):
    """The importer's spec of one external run (`optional` is workflow-only)."""
    return section(config["runs"][wildcards.run], ("optional",))


def summary_inputs(wildcards):
    """Every table the summary speaks about that this configuration produces."""
    inputs = {"group_size": f"{RESULTS}/theory/group_size_table.csv"}
    inputs["identity"] = f"{RESULTS}/theory/identity_residuals.csv"
    inputs["group_bias"] = f"{RESULTS}/theory/group_bias.csv"
    inputs["estimator_mass"] = f"{RESULTS}/theory/estimator_mass.csv"
    inputs["estimator_identity"] = f"{RESULTS}/theory/estimator_identity.csv"
    inputs |= {f"difficulty_{t}": f"{RESULTS}/difficulty/{t}/summary.csv" for t in TABLES}
    inputs |= {f"simulate_{t}": f"{RESULTS}/simulate/{t}/summary.csv" for t in SIM_TABLES}
    for t in LENGTH_BIAS_TABLES:
        inputs[f"length_bias_{t}"] = f"{RESULTS}/length_bias/{t}/summary.csv"
        inputs[f"length_bias_fit_{t}"] = f"{RESULTS}/length_bias/{t}/fit.csv"
    if POLICY_ENABLED:
        inputs["training"] = f"{RESULTS}/decompose/summary.csv"
        inputs["training_windows"] = f"{RESULTS}/decompose/windows.csv"
        inputs["base_policy"] = f"{RESULTS}/passrates/{POLICY_TABLE}.parquet"
        inputs["training_steps"] = f"{RESULTS}/decompose/all_steps.parquet"
        inputs["training_identity"] = f"{RESULTS}/decompose/all_identity.parquet"
        inputs["length_pressure"] = f"{RESULTS}/length_pressure/summary.csv"
        inputs["length_pressure_prediction"] = f"{RESULTS}/length_pressure/prediction.csv"
    if REAL_LENGTH_INPUTS:
        inputs["real_lengths"] = f"{RESULTS}/real_lengths/by_correctness.csv"
    if DAPO_CURVE is not None:
        inputs["dapo"] = f"{RESULTS}/dapo/fit_summary.csv"
    if ALLOCATION_PAIRS:
        inputs["allocation"] = f"{RESULTS}/allocation/comparison.csv"
        inputs["allocation_bands"] = f"{RESULTS}/allocation/by_band.csv"
    for run in RUNS_EXTERNAL:
        inputs[f"external_{run}"] = f"{RESULTS}/external/{run}/summary.csv"
    if AWARE_ENABLED:  # aware.smk
        inputs["aware"] = f"{RESULTS}/aware/drift.csv"
    if AWARE_BRIDGE:
        inputs["aware_bridge"] = f"{RESULTS}/aware/bridge.csv"
    return inputs


def train_targets():
    if not POLICY_ENABLED:
        return []
    return run_files("steps.parquet")


def all_targets():
    targets = [
        f"{RESULTS}/theory/group_size_table.csv",
        f"{RESULTS}/theory/identity_residuals.csv",
        f"{RESULTS}/theory/group_bias.csv",
        f"{RESULTS}/theory/estimator_identity.csv",
        f"{RESULTS}/figures/identity.png",
        f"{RESULTS}/figures/estimator_mass.png",
        f"{RESULTS}/figures/fidelity.png",
        f"{RESULTS}/figures/difficulty_weight.png",
        f"{RESULTS}/figures/silent_rate.png",
    ]
    targets += expand(f"{RESULTS}/figures/difficulty_{{table}}.png", table=TABLES)
    targets += expand(f"{RESULTS}/difficulty/{{table}}/summary.csv", table=TABLES)
    targets += expand(f"{RESULTS}/simulate/{{table}}/summary.csv", table=SIM_TABLES)
    targets += expand(f"{RESULTS}/figures/simulation_{{table}}.png", table=SIM_TABLES)
    targets += train_targets()
    if POLICY_ENABLED:
        targets += expand(f"{RESULTS}/figures/{{name}}.png", name=TRAINING_FIGURES)
    if PLAN.channel_enabled:
        targets += [f"{RESULTS}/figures/channel.png", f"{RESULTS}/figures/length_drift_runs.png"]
    targets += AWARE_TARGETS  # workflow/rules/aware.smk
    if REAL_LENGTH_INPUTS:
        targets.append(f"{RESULTS}/figures/real_lengths.png")
    if ALLOCATION_PAIRS:
        targets.append(f"{RESULTS}/figures/allocation.png")
    targets += expand(f"{RESULTS}/figures/external_{{run}}.png", run=RUNS_EXTERNAL)
    targets += expand(f"{RESULTS}/figures/length_bias_{{table}}.png", table=LENGTH_BIAS_TABLES)
    if POLICY_ENABLED:
        targets.append(f"{RESULTS}/figures/length_pressure.png")
    targets += expand(f"{RESULTS}/external/{{run}}/length_pressure.csv", run=RUNS_EXTERNAL)
    targets.append(f"{RESULTS}/summary.md")
    if DAPO_CURVE is not None:
        targets += [f"{RESULTS}/dapo/fit_summary.csv", f"{RESULTS}/figures/dapo_fit.png"]
    return targets

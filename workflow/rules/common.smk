"""Helpers shared by the rules: config validation and target lists. No torch import here."""

import re
import sys
from pathlib import Path

import jsonschema
from snakemake.utils import validate


def _config_error(config):
    """One line naming the first invalid key, or None when the config is valid."""
    schema_path = Path(workflow.basedir) / "workflow" / "schemas" / "config.schema.yaml"
    import yaml

    schema = yaml.safe_load(schema_path.read_text())
    error = jsonschema.exceptions.best_match(
        jsonschema.Draft202012Validator(schema).iter_errors(config)
    )
    if error is None:
        return None
    where = ".".join(str(part) for part in error.absolute_path) or "<top level>"
    return f"config error at '{where}': {error.message}"


_error = _config_error(config)
if _error is not None:
    raise WorkflowError(_error)
validate(config, "../schemas/config.schema.yaml")  # fills the schema's defaults

RESULTS = config["results_dir"]
# The hub-id rule has one home, grpo_dial.data.sources (standard library only, so no torch at
# parse time); the repository's own source first, as in the rule scripts.
sys.path.insert(0, str(Path(workflow.basedir) / "src"))
from grpo_dial.data.sources import is_remote  # noqa: E402


def _note(message):
    print(f"grpo-dial: {message}", file=sys.stderr)


def _available(path, optional, allow_hub_id=False):
    """Whether a configured input can be read; a missing required file stops the DAG build."""
    remote = is_remote(path)
    if Path(path).exists() or (allow_hub_id and remote):
        return True
    if optional:
        _note(f"skipping {path}: not found (optional)")
        return False
    raise WorkflowError(f"config error: input path not found: {path}")


def _table_available(name, spec):
    if "path" not in spec:
        return True
    return _available(spec["path"], spec.get("optional", False), spec["kind"] == "bigmath")


POLICY_TABLE = "base_policy"  # the base policy's own pass rates (rule estimate_pass_rates)
if POLICY_TABLE in config["passrate_tables"]:
    raise WorkflowError(f"config error: '{POLICY_TABLE}' is reserved for the base policy's pass rates")
CONFIGURED_TABLES = [
    name for name, spec in config["passrate_tables"].items() if _table_available(name, spec)
]
POLICY_ENABLED = bool(config["dials"]) and config["train"]["steps"] > 0
TABLES = CONFIGURED_TABLES + ([POLICY_TABLE] if POLICY_ENABLED else [])
for _name in config["simulate"]["tables"] + [config["dapo_consistency"]["table"]]:
    if _name not in config["passrate_tables"] and not (_name == POLICY_TABLE and POLICY_ENABLED):
        raise WorkflowError(
            f"config error: unknown pass-rate table '{_name}'; "
            f"defined: {sorted(config['passrate_tables'])}"
        )
SIM_TABLES = [name for name in config["simulate"]["tables"] if name in TABLES]
DAPO = config["dapo_consistency"]
DAPO_ENABLED = DAPO["table"] in TABLES and _available(DAPO["curve"], DAPO["optional"])

wildcard_constraints:
    table="|".join(re.escape(name) for name in [*config["passrate_tables"], POLICY_TABLE]),
    dial="|".join(re.escape(name) for name in config["dials"]) or "NONE",
    seed=r"\d+",
    run="|".join(re.escape(name) for name in config["runs"]) or "NONE",

CONFIGURED_TABLE_PATTERN = "|".join(re.escape(name) for name in config["passrate_tables"]) or "NONE"

# ------------------------------------------------------------------ policy and training
GPU = 1 if config["model"]["device"].startswith("cuda") else 0
TINY = config["model"]["base"] == "tiny"
# model.base names the workflow builds (rule warm_start, rules in models.smk) -> their output;
# any other value is a local path or hub id used as given.
BUILT_MODELS = {
    "tiny": f"{RESULTS}/policy/base",
    "smollm2": f"{RESULTS}/models/smollm2-135m-instruct",
}
BASE_MODEL = BUILT_MODELS.get(config["model"]["base"], [])  # a job input only when we build it
LR_MATCH = config["train"]["lr_match"]
if LR_MATCH["enabled"] and LR_MATCH["reference"] not in config["dials"]:
    raise WorkflowError(
        f"config error: train.lr_match.reference '{LR_MATCH['reference']}' is not in dials "
        f"{sorted(config['dials'])}"
    )


def train_params(wildcards):
    """The TrainConfig fields (every train key but the workflow-only ones)."""
    skip = {"seeds", "lr_match", "threads", "allocation"}
    return {key: value for key, value in config["train"].items() if key not in skip}


def train_inputs(wildcards):
    """Base model, its pass rates and, with lr matching, this arm's and the reference's calibration."""
    inputs = {"passrates": f"{RESULTS}/passrates/{POLICY_TABLE}.parquet"}
    if BASE_MODEL:
        inputs["model"] = BASE_MODEL
    if LR_MATCH["enabled"]:
        inputs["calibration"] = f"{RESULTS}/train/{wildcards.dial}/lr_calibration.csv"
        inputs["reference"] = f"{RESULTS}/train/{LR_MATCH['reference']}/lr_calibration.csv"
    return inputs


def train_targets():
    if not POLICY_ENABLED:
        return []
    return expand(
        f"{RESULTS}/train/{{dial}}/seed{{seed}}/steps.parquet",
        dial=list(config["dials"]),
        seed=config["train"]["seeds"],
    )


def passrate_spec(wildcards):
    """The loader keyword arguments of one pass-rate table (the `optional` flag is workflow-only)."""
    spec = dict(config["passrate_tables"][wildcards.table])
    spec.pop("optional", None)
    return spec


# ------------------------------------------------------------------ length by correctness
RUNS = [[dial, seed] for dial in config["dials"] for seed in config["train"]["seeds"]]


def run_files(name):
    """One file per (dial, seed) run, in the order of RUNS."""
    return [f"{RESULTS}/train/{dial}/seed{seed}/{name}" for dial, seed in RUNS]


def decomposition_files(name):
    return [f"{RESULTS}/decompose/{dial}/seed{seed}/{name}" for dial, seed in RUNS]


TRAINING_FIGURES = [
    "length_curves", "decomposition", "accuracy_length", "silent_training", "identity_training"
]
REAL = config["real_lengths"]
REAL_LENGTH_INPUTS = {
    name: REAL[name]
    for name in ("math_cot", "gsm8k")
    if REAL.get(name) and _available(REAL[name], REAL["optional"])
}


# ------------------------------------------------------------------ the checking tail's channel
TASK_OPTIONS = config["task"]["options"]
CHANNEL_ENABLED = POLICY_ENABLED and config["task"]["name"] == "arithmetic" and bool(
    TASK_OPTIONS.get("tail_checks", 0)
)
if CHANNEL_ENABLED and config["channel"]["reference"] not in config["dials"]:
    raise WorkflowError(
        f"config error: channel.reference '{config['channel']['reference']}' is not in dials "
        f"{sorted(config['dials'])}"
    )
CHANNEL_PARAMS = {
    "task": config["task"],
    "channel": config["channel"],
    "device": config["model"]["device"],
    "pool": config["pass_rates"]["pool"],
    "pool_seed": config["pass_rates"]["seed"],
    "max_new_tokens": config["train"]["max_new_tokens"],
    "threads": config["train"]["threads"],
}


# ------------------------------------------------------------------ adaptive group sizes
# A dial entry's keys that are not the Dial's: grpo_dial.train.arms.ALLOCATION_KEYS (that module
# imports torch, which this file must not).
ALLOCATION_KEYS = ("group_size", "allocation")


def _uniform_twin(name, spec):
    """The uniform dial with the same settings as adaptive dial `name` but for allocation."""
    core = {k: v for k, v in spec.items() if k not in ALLOCATION_KEYS}
    for other, other_spec in config["dials"].items():
        uniform = other_spec.get("group_size", "uniform") == "uniform"
        if other != name and uniform and {
            k: v for k, v in other_spec.items() if k not in ALLOCATION_KEYS
        } == core:
            return other
    _note(f"dial '{name}' (group_size: adaptive) has no uniform twin in dials; not compared")
    return None


ALLOCATION_PAIRS = {
    name: twin
    for name, spec in config["dials"].items()
    if spec.get("group_size") == "adaptive" and (twin := _uniform_twin(name, spec)) is not None
} if POLICY_ENABLED else {}
ALLOCATION_RUNS = [
    [dial, seed]
    for dial in dict.fromkeys([*ALLOCATION_PAIRS, *ALLOCATION_PAIRS.values()])
    for seed in config["train"]["seeds"]
]


def allocation_files(name):
    return [f"{RESULTS}/train/{dial}/seed{seed}/{name}" for dial, seed in ALLOCATION_RUNS]


# ------------------------------------------------------------------ external runs
RUNS_EXTERNAL = [
    name for name, spec in config["runs"].items() if _available(spec["path"], spec["optional"])
]


def run_spec(wildcards):
    """The importer's spec of one external run (`optional` is workflow-only)."""
    spec = dict(config["runs"][wildcards.run])
    spec.pop("optional", None)
    return spec


def summary_inputs(wildcards):
    """Every table the summary speaks about that this configuration produces."""
    inputs = {"group_size": f"{RESULTS}/theory/group_size_table.csv"}
    if POLICY_ENABLED:
        inputs["training"] = f"{RESULTS}/decompose/summary.csv"
        inputs["difficulty"] = f"{RESULTS}/difficulty/{POLICY_TABLE}/summary.csv"
    if SIM_TABLES:
        inputs["simulate"] = f"{RESULTS}/simulate/{SIM_TABLES[0]}/summary.csv"
    if REAL_LENGTH_INPUTS:
        inputs["real_lengths"] = f"{RESULTS}/real_lengths/by_correctness.csv"
    if DAPO_ENABLED:
        inputs["dapo"] = f"{RESULTS}/dapo/fit_summary.csv"
    if ALLOCATION_PAIRS:
        inputs["allocation"] = f"{RESULTS}/allocation/comparison.csv"
        inputs["allocation_bands"] = f"{RESULTS}/allocation/by_band.csv"
    for run in RUNS_EXTERNAL:
        inputs[f"external_{run}"] = f"{RESULTS}/external/{run}/summary.csv"
    return inputs


def all_targets():
    targets = [
        f"{RESULTS}/theory/group_size_table.csv",
        f"{RESULTS}/theory/identity_residuals.csv",
        f"{RESULTS}/figures/identity.png",
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
    if CHANNEL_ENABLED:
        targets += [f"{RESULTS}/figures/channel.png", f"{RESULTS}/figures/length_drift_runs.png"]
    if REAL_LENGTH_INPUTS:
        targets.append(f"{RESULTS}/figures/real_lengths.png")
    if ALLOCATION_PAIRS:
        targets.append(f"{RESULTS}/figures/allocation.png")
    targets += expand(f"{RESULTS}/figures/external_{{run}}.png", run=RUNS_EXTERNAL)
    targets.append(f"{RESULTS}/summary.md")
    if DAPO_ENABLED:
        targets += [f"{RESULTS}/dapo/fit_summary.csv", f"{RESULTS}/figures/dapo_fit.png"]
    return targets

"""Helpers shared by the rules: config validation, data and hub checks, target lists.

Every config problem stops the DAG build with one line (a WorkflowError), before any job runs.
No torch import here.
"""

import os
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

# The hub-id and public-file rules have one home each, grpo_dial.data.sources and .public
# (standard library only, so no torch at parse time); the repository's own source first.
REPO = Path(workflow.basedir).resolve()
sys.path.insert(0, str(REPO / "src"))
from grpo_dial.data.public import check_entry, locate, mirror_folder, unsafe_output_dir  # noqa: E402
from grpo_dial.data.sources import (  # noqa: E402
    OFFLINE_VARIABLES,
    hub_model_id,
    hub_offline,
    is_hub_id,
    missing_path,
)


def _note(message):
    print(f"grpo-dial: {message}", file=sys.stderr)


def _fail(where, message):
    raise WorkflowError(f"config error at '{where}': {message}")


def _output_dir(key):
    """results_dir / resources_dir: a folder of its own, never the repository or above it."""
    if (problem := unsafe_output_dir(config[key], REPO, Path.cwd())) is not None:
        _fail(key, problem)
    return config[key]


RESULTS = _output_dir("results_dir")
RESOURCES = _output_dir("resources_dir")
_res = [Path(RESULTS).resolve(), Path(RESOURCES).resolve()]
if _res[0] == _res[1] or _res[0] in _res[1].parents or _res[1] in _res[0].parents:
    _fail("resources_dir", f"{RESOURCES!r} and results_dir {RESULTS!r} must not nest")

# ------------------------------------------------------------------ network and public data
OFFLINE = config["offline"]
if OFFLINE:  # every job inherits these (a cluster job re-reads this file and sets them again)
    os.environ.update({name: "1" for name in OFFLINE_VARIABLES})
try:
    MIRROR = mirror_folder(config["data_mirror"], REPO)
except ValueError as error:
    _fail("data_mirror", str(error))
PUBLIC = config["public_data"]
for _name, _entry in PUBLIC.items():
    try:
        check_entry(_name, _entry)
    except ValueError as error:
        _fail(f"public_data.{_name}", str(error))
PUBLIC_FILES = {entry["file"]: name for name, entry in PUBLIC.items()}  # rule download's files


def hub_entry(hub, where):
    """An explicit hub id (`hub: <id>`): refused under offline: true."""
    if not isinstance(hub, str) or not is_hub_id(hub):
        _fail(where, f"{hub!r} is not a hub id (owner/name)")
    if OFFLINE:
        _fail(where, f"offline: true refuses hub access ({hub}); point it at a local copy")
    if hub_offline():
        _note(f"{hub_offline()} is set: {hub} is read from the local Hugging Face cache only")
    return hub


def data_file(ref, where, optional=False, hint=None):
    """The local path a job reads for a file reference (a path or {public: name}); None = skip.
    `hint` ("hub: ") where the entry could name the hub instead of a missing hub-shaped path."""
    if isinstance(ref, dict):
        name = ref["public"]
        try:
            path, needed = locate(name, PUBLIC, MIRROR, RESOURCES, config["data_mirror"] == "auto")
        except ValueError as error:
            _fail(where, str(error))
        if needed and OFFLINE:  # else rule download writes `path` before the jobs that read it
            _fail(where, f"offline: true, but public file {name!r} is neither in data_mirror nor at {path}")
        return str(path)
    if Path(ref).exists():
        return ref
    if optional:
        _note(f"skipping {ref}: not found (optional)")
        return None
    _fail(where, missing_path(ref, "input path", hint))


POLICY_TABLE = "base_policy"  # the base policy's own pass rates (rule estimate_pass_rates)
if POLICY_TABLE in config["passrate_tables"]:
    raise WorkflowError(f"config error: '{POLICY_TABLE}' is reserved for the base policy's pass rates")


def _table_input(name, spec):
    """The file a table's job reads (None: synthetic or hub), or False when skipped."""
    where = f"passrate_tables.{name}"
    given = [key for key in ("path", "public", "hub") if key in spec]
    if len(given) > 1:
        _fail(where, f"give one of path, public, hub; got {', '.join(given)}")
    if spec["kind"] == "synthetic":
        if given:
            _fail(f"{where}.{given[0]}", "a synthetic table reads no file")
        return None
    if not given:
        hub = " or hub (bigmath)" if spec["kind"] == "bigmath" else ""
        _fail(where, f"kind {spec['kind']} needs path (a local file), public (a public_data name){hub}")
    if given == ["hub"]:
        if spec["kind"] != "bigmath":
            _fail(f"{where}.hub", f"only kind bigmath reads the hub, not {spec['kind']}")
        hub_entry(spec["hub"], f"{where}.hub")
        return None
    if given == ["public"]:
        return data_file({"public": spec["public"]}, f"{where}.public")
    hint = "hub: " if spec["kind"] == "bigmath" else None
    return data_file(spec["path"], f"{where}.path", spec["optional"], hint) or False


TABLE_INPUTS = {name: _table_input(name, spec) for name, spec in config["passrate_tables"].items()}
CONFIGURED_TABLES = [name for name, path in TABLE_INPUTS.items() if path is not False]
POLICY_ENABLED = bool(config["dials"]) and config["train"]["steps"] > 0
TABLES = CONFIGURED_TABLES + ([POLICY_TABLE] if POLICY_ENABLED else [])
for _name in config["simulate"]["tables"] + [config["dapo_consistency"]["table"]]:
    if _name not in config["passrate_tables"] and not (_name == POLICY_TABLE and POLICY_ENABLED):
        raise WorkflowError(
            f"config error: unknown pass-rate table '{_name}'; "
            f"defined: {sorted(config['passrate_tables'])}"
        )
SIM_TABLES = [name for name in config["simulate"]["tables"] if name in TABLES]
for _name in config["length_bias"]["tables"]:
    if _name not in config["passrate_tables"] and _name != POLICY_TABLE:
        raise WorkflowError(
            f"config error: unknown pass-rate table '{_name}' in length_bias.tables; "
            f"defined: {sorted(config['passrate_tables'])} and {POLICY_TABLE}"
        )
if config["length_bias"]["n_prompts"] % config["length_bias"]["groups_per_batch"]:
    raise WorkflowError(
        "config error: length_bias.n_prompts must be a multiple of length_bias.groups_per_batch"
    )
# base_policy only when the policy chain runs (the analysis half alone skips it)
LENGTH_BIAS_TABLES = [name for name in config["length_bias"]["tables"] if name in TABLES]
# length_bias keys that are LengthBiasConfig fields or the closed-form grid (not run_normalizers)
LENGTH_BIAS_KEYS = [key for key in config["length_bias"] if key not in ("tables", "run_normalizers")]
DAPO = config["dapo_consistency"]
DAPO_CURVE = None
if DAPO["curve"] is not None and DAPO["table"] in TABLES:
    DAPO_CURVE = data_file(DAPO["curve"], "dapo_consistency.curve", DAPO["optional"])
DAPO_ENABLED = DAPO_CURVE is not None

wildcard_constraints:
    table="|".join(re.escape(name) for name in [*config["passrate_tables"], POLICY_TABLE]),
    dial="|".join(re.escape(name) for name in config["dials"]) or "NONE",
    seed=r"\d+",
    run="|".join(re.escape(name) for name in config["runs"]) or "NONE",

CONFIGURED_TABLE_PATTERN = "|".join(re.escape(name) for name in config["passrate_tables"]) or "NONE"

# ------------------------------------------------------------------ policy and training
GPU = 1 if config["model"]["device"].startswith("cuda") else 0
# One GPU job per visible GPU under every local profile: unless `resources: gpu=N` was given
# (the slurm profile gives one), the scheduler's gpu limit is this machine's GPU count
# (grpo_dial.policy.devices, no torch); 0 on a CPU machine, where a GPU config plans as for one
# GPU (its jobs would stop at device 'cuda' with one line).
if workflow.global_resources.get("gpu").value is None:
    from grpo_dial.policy.devices import visible_gpu_count  # noqa: E402

    VISIBLE_GPUS = visible_gpu_count()
    workflow.register_resource("gpu", VISIBLE_GPUS or GPU)
    if GPU:
        print(f"GPU jobs at once: {VISIBLE_GPUS or GPU} (visible GPUs: {VISIBLE_GPUS}; "
              "--resources gpu=N to change)", file=sys.stderr)
TINY = config["model"]["base"] == "tiny"
# model.base names the workflow builds (rule warm_start, rules in models.smk) -> their output;
# any other value is a local directory, or hub:<id>, used as given.
BUILT_MODELS = {
    "tiny": f"{RESULTS}/policy/base",
    "smollm2": f"{RESULTS}/models/smollm2-135m-instruct",
}
BASE_MODEL = BUILT_MODELS.get(config["model"]["base"], [])  # a job input only when we build it
if POLICY_ENABLED and not BASE_MODEL:
    _base = config["model"]["base"]
    if hub_model_id(_base) is not None:
        hub_entry(hub_model_id(_base), "model.base")
    elif not Path(_base).is_dir():
        _fail("model.base", missing_path(_base, "policy directory", hint="base: hub:"))


def _task_spec(spec, where):
    """A math source spec with `public: <name>` replaced by the file's path; paths checked."""
    if not isinstance(spec, dict) or "dataset" not in spec:
        return spec
    spec = dict(spec)
    if "public" in spec:
        if "path" in spec or "hub" in spec:
            _fail(where, "give one of path, public, hub")
        spec["path"] = data_file({"public": spec.pop("public")}, f"{where}.public")
    elif "hub" in spec:
        hub_entry(spec["hub"], f"{where}.hub")
    elif "path" in spec:
        data_file(spec["path"], f"{where}.path", hint="hub: ")
    return spec


def _task():
    """config['task'] with its source specs resolved, built once so a bad option fails here."""
    from grpo_dial.data.tasks import option_error  # numpy and pandas, no torch

    options = {
        key: [_task_spec(s, f"task.options.{key}[{i}]") for i, s in enumerate(value)]
        if isinstance(value, list) else value
        for key, value in config["task"]["options"].items()
    }
    if (error := option_error(config["task"]["name"], options)) is not None:
        raise WorkflowError(error)
    return {"name": config["task"]["name"], "options": options}


TASK = _task()
TASK_INPUTS = {  # every data file the task reads, so rule download runs before the policy jobs
    f"task_{key}_{i}": spec["path"]
    for key, value in TASK["options"].items() if isinstance(value, list)
    for i, spec in enumerate(value) if isinstance(spec, dict) and "path" in spec
}


def _check_strata():
    """A dial's stratum key must be one the task gives every response (one line, before any job)."""
    from grpo_dial.data.tasks import get_task, stratum_error  # no torch

    keyed = {name: spec["strata"] for name, spec in config["dials"].items() if spec.get("strata")}
    if keyed:
        task = get_task(TASK["name"], **TASK["options"])
        for name, key in keyed.items():
            if (why := stratum_error(task, key)) is not None:
                raise WorkflowError(f"config error at 'dials.{name}.strata': {why}")


_check_strata()
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
    inputs = {"passrates": f"{RESULTS}/passrates/{POLICY_TABLE}.parquet", **TASK_INPUTS}
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
    """The loader keyword arguments of one pass-rate table, but its file (the job's input
    `source`); `optional` and `public` are workflow-only."""
    spec = dict(config["passrate_tables"][wildcards.table])
    for key in ("optional", "public", "path"):
        spec.pop(key, None)
    return spec


def passrate_input(wildcards):
    path = TABLE_INPUTS[wildcards.table]
    return {"source": path} if path else {}


# ------------------------------------------------------------------ length by correctness
RUNS = [[dial, seed] for dial in config["dials"] for seed in config["train"]["seeds"]]


def run_files(name):
    """One file per (dial, seed) run, in the order of RUNS."""
    return [f"{RESULTS}/train/{dial}/seed{seed}/{name}" for dial, seed in RUNS]


def decomposition_files(name):
    return [f"{RESULTS}/decompose/{dial}/seed{seed}/{name}" for dial, seed in RUNS]




def _newer_estimator(name, spec):
    """Whether a dial uses lambda-GRPO's weights, strata or an anchor (its per-step state); a
    combination the Dial refuses (e.g. lambda_learnable without length_norm lambda) stops here."""
    from grpo_dial.core.dial import dial_from_config  # the standard library only, no torch

    try:
        dial = dial_from_config({k: v for k, v in spec.items() if k not in ALLOCATION_KEYS})
    except ValueError as error:
        raise WorkflowError(f"config error at 'dials.{name}': {error}") from None
    return dial.length_norm == "lambda" or dial.strata is not None or dial.anchor != "none"


ALLOCATION_KEYS = ("group_size", "allocation")
NEWER_ESTIMATORS = [name for name, spec in config["dials"].items() if _newer_estimator(name, spec)]
TRAINING_FIGURES = [
    "length_curves", "decomposition", "accuracy_length", "silent_training", "identity_training"
] + (["estimators_training"] if NEWER_ESTIMATORS else [])
REAL = config["real_lengths"]
REAL_LENGTH_INPUTS = {
    name: path
    for name in ("math_cot", "gsm8k")
    if REAL[name] is not None
    and (path := data_file(REAL[name], f"real_lengths.{name}", REAL["optional"])) is not None
}
if REAL_LENGTH_INPUTS and REAL["tokenizer"] is not None and not Path(REAL["tokenizer"]).is_dir():
    _fail("real_lengths.tokenizer", missing_path(REAL["tokenizer"], "tokenizer directory", None))


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
    name
    for name, spec in config["runs"].items()
    if data_file(spec["path"], f"runs.{name}.path", spec["optional"]) is not None
]
for _name in RUNS_EXTERNAL:  # a tokenizer is read locally, never looked up on the hub
    if (_tok := config["runs"][_name].get("tokenizer")) and not Path(_tok).is_dir():
        _fail(f"runs.{_name}.tokenizer", missing_path(_tok, "tokenizer directory", None))


def run_spec(wildcards):
    """The importer's spec of one external run (`optional` is workflow-only)."""
    spec = dict(config["runs"][wildcards.run])
    spec.pop("optional", None)
    return spec


def summary_inputs(wildcards):
    """Every table the summary speaks about that this configuration produces."""
    inputs = {"group_size": f"{RESULTS}/theory/group_size_table.csv"}
    inputs["identity"] = f"{RESULTS}/theory/identity_residuals.csv"
    inputs["group_bias"] = f"{RESULTS}/theory/group_bias.csv"
    inputs |= {f"difficulty_{t}": f"{RESULTS}/difficulty/{t}/summary.csv" for t in TABLES}
    inputs |= {f"simulate_{t}": f"{RESULTS}/simulate/{t}/summary.csv" for t in SIM_TABLES}
    for t in LENGTH_BIAS_TABLES:
        inputs[f"length_bias_{t}"] = f"{RESULTS}/length_bias/{t}/summary.csv"
        inputs[f"length_bias_fit_{t}"] = f"{RESULTS}/length_bias/{t}/fit.csv"
    if POLICY_ENABLED:
        inputs["training"] = f"{RESULTS}/decompose/summary.csv"
        inputs["base_policy"] = f"{RESULTS}/passrates/{POLICY_TABLE}.parquet"
        inputs["training_steps"] = f"{RESULTS}/decompose/all_steps.parquet"
        inputs["training_identity"] = f"{RESULTS}/decompose/all_identity.parquet"
        inputs["length_pressure"] = f"{RESULTS}/length_pressure/summary.csv"
        inputs["length_pressure_prediction"] = f"{RESULTS}/length_pressure/prediction.csv"
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
        f"{RESULTS}/theory/group_bias.csv",
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
    targets += expand(f"{RESULTS}/figures/length_bias_{{table}}.png", table=LENGTH_BIAS_TABLES)
    if POLICY_ENABLED:
        targets.append(f"{RESULTS}/figures/length_pressure.png")
    targets += expand(f"{RESULTS}/external/{{run}}/length_pressure.csv", run=RUNS_EXTERNAL)
    targets.append(f"{RESULTS}/summary.md")
    if DAPO_ENABLED:
        targets += [f"{RESULTS}/dapo/fit_summary.csv", f"{RESULTS}/figures/dapo_fit.png"]
    return targets

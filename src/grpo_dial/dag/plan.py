"""Everything the rules read, decided once at DAG build: the config's one door (`open_plan`).

`open_plan` reads the schema once (its dial part generated from the fields' one definition,
grpo_dial.dag.schema), checks the config files and values the schema cannot see
(grpo_dial.dag.config_checks), validates and fills the defaults, then `build_plan` checks every
input and arm and derives the DAG's lists. The order of the checks is the order a user fixes a
config in: files and values, the schema, folders and public data, the pass-rate tables, the base
model, the task and its strata, the arms, then the optional analyses.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from grpo_dial.backends.trl.config import backend_error, split_error
from grpo_dial.backends.trl.settings import launch_settings
from grpo_dial.core.dial import Arm
from grpo_dial.dag import ConfigError, fail
from grpo_dial.dag import arms as arm_checks
from grpo_dial.dag.config_checks import config_problems
from grpo_dial.dag.inputs import (
    POLICY_TABLE,
    Inputs,
    check_capacity,
    check_strata,
    path_is,
    task,
    task_inputs,
)
from grpo_dial.dag.schema import config_error, read_schema
from grpo_dial.data.sources import hub_model_id, missing_path

SCHEMA = Path("workflow") / "schemas" / "config.schema.yaml"  # under the repository

# Workflow-only keys of a section, never handed to the library dataclass the section feeds.
TRAIN_WORKFLOW_KEYS = ("seeds", "lr_match", "threads", "allocation", "backend", "trl")
PASSRATE_WORKFLOW_KEYS = ("optional", "public", "path")
LENGTH_BIAS_WORKFLOW_KEYS = ("tables", "run_normalizers")


@dataclass(frozen=True)
class Plan:
    """What the DAG build decided; common.smk names each field for the rules."""

    inputs: Inputs
    table_inputs: dict  # table -> its job's input file, None (synthetic, hub) or False (skipped)
    tables: list  # every pass-rate table made, the base policy's last
    sim_tables: list
    length_bias_tables: list
    policy_enabled: bool
    base_model: str | list  # the runs' base model's directory (built or local), [] for a hub id
    warm_start_from: str | list | None  # the pretrained model rule warm_start tunes; None: tiny
    task: dict
    task_inputs: dict
    arms: dict[str, Arm]
    arm_fields: dict  # arm -> the resolved fields its jobs rebuild it from
    backends: dict  # arm -> its training backend, own or trl
    runs: list  # [arm, seed] of every training run
    stateful_arms: list
    allocation_pairs: dict
    allocation_runs: list
    real_length_inputs: dict
    dapo_curve: str | None
    channel_enabled: bool
    aware_enabled: bool  # task aware: the aware-tail study (aware.smk)
    aware_bridge: bool  # and math_cot's real responses beside it
    aware_later: list  # the arms rule aware_later_probe replays ([]: the rule is off)
    runs_external: list


def _check_tables(config: Mapping, policy_enabled: bool) -> None:
    defined = sorted(config["passrate_tables"])
    where = {"simulate.tables": config["simulate"]["tables"],
             "dapo_consistency.table": [config["dapo_consistency"]["table"]],
             "length_bias.tables": config["length_bias"]["tables"]}  # fmt: skip
    for key, names in where.items():
        for name in names:
            if name == POLICY_TABLE and not policy_enabled and key != "length_bias.tables":
                fail(
                    key,
                    f"'{POLICY_TABLE}' is the trained policy's table, but no arm trains "
                    f"(dials is empty or every arm is null); remove it or add an arm",
                )
            if name not in config["passrate_tables"] and name != POLICY_TABLE:
                raise ConfigError(
                    f"config error: unknown pass-rate table '{name}'"
                    + (" in length_bias.tables" if key == "length_bias.tables" else "")
                    + f"; defined: {defined}"
                    + (f" and {POLICY_TABLE}" if key == "length_bias.tables" else "")
                )
    _check_difficulty_allocation(config["difficulty"]["allocation"])
    lb = config["length_bias"]
    if lb["n_prompts"] % lb["groups_per_batch"]:
        raise ConfigError(
            "config error: length_bias.n_prompts must be a multiple of length_bias.groups_per_batch"
        )


def _aware_later(config: Mapping, arms: Mapping, aware: bool) -> list:
    """The arms aware_sweep.later_probe replays, [] when it is off (no aware study, no SGD cell
    or no step); a seed outside train.seeds, an arm outside dials or a step not before the
    updates behind the runs' last window (runs.window_updates) is one line naming it."""
    sweep, key = config["aware_sweep"], "aware_sweep.later_probe"
    later = sweep["later_probe"]
    if not aware or "sgd" not in sweep["optimizers"] or not later["steps"]:
        return []
    for i, arm in enumerate(later["arms"]):
        if arm not in arms:
            fail(f"{key}.arms.{i}", f"{arm!r} is not an arm of dials ({', '.join(arms)})")
    for i, seed in enumerate(later["seeds"]):
        if seed not in config["train"]["seeds"]:
            fail(f"{key}.seeds.{i}", f"seed {seed} is not one of train.seeds")
    steps, fraction = int(config["train"]["steps"]), config["decompose"]["window_fraction"]
    window = max(1, int(round(steps * fraction)))
    updates = steps - (window + 1) / 2  # the mean of step - 1 over the last `window` steps
    for i, step in enumerate(later["steps"]):
        if not step < updates:
            fail(f"{key}.steps.{i}", f"step {step} is not before the {updates:g} updates behind "
                 f"the runs' last window (train.steps {steps}, decompose.window_fraction "
                 f"{fraction}); list earlier steps, or [] to switch the probe off")  # fmt: skip
    return list(later["arms"])


def _check_difficulty_allocation(allocation: Mapping) -> None:
    """The difficulty study's allocation bounds: g_max below g_min stops its job, and a g_max or
    per_prompt_budget of 1 gives groups of one response (no spread: every advantage is 0)."""
    where = "difficulty.allocation"
    if allocation["g_max"] < allocation["g_min"]:
        fail(f"{where}.g_max", f"{allocation['g_max']} is below g_min {allocation['g_min']}")
    for key in ("g_max", "per_prompt_budget"):
        if allocation[key] < 2:
            fail(f"{where}.{key}", f"{allocation[key]} gives groups of one response: a group of "
                 "one has no spread, so every advantage is 0; use 2 or more")  # fmt: skip


def _check_policy_settings(config: Mapping) -> None:
    """What a policy job would refuse only after its upstream work: a head count that does not
    divide the hidden size, and demonstration styles whose weights are all 0."""
    spec = config["model"]["spec"]
    if spec["hidden_size"] % spec["n_heads"]:
        fail(
            "model.spec.n_heads",
            f"{spec['n_heads']} heads do not divide hidden_size {spec['hidden_size']}",
        )
    _check_style_weights(config)


def _check_style_weights(config: Mapping) -> None:
    weights = config["warm_start"]["style_weights"]
    if weights and not any(w > 0 for w in weights.values()):
        fail("warm_start.style_weights", "every weight is 0; give at least one style a weight > 0")


def warm_started(config: Mapping) -> bool:
    """Whether the runs start from rule warm_start's model: the tiny policy always, a
    pretrained base with warm_start.pretrained."""
    return config["model"]["base"] == "tiny" or bool(config["warm_start"].get("pretrained"))


def _base_model(config: Mapping, inputs: Inputs, policy_enabled: bool) -> str | list:
    """The model model.base names as a job input: the output of the rule that builds it (tiny,
    smollm2), or the local directory model.base names; [] for hub:<id>, read by the job itself.
    The runs' base is rule warm_start's model where `warm_started`, this model otherwise."""
    built = {
        "tiny": f"{inputs.results}/policy/base",
        "smollm2": f"{inputs.results}/models/smollm2-135m-instruct",
    }
    base = config["model"]["base"]
    if base in built:
        return built[base]
    hub, local = hub_model_id(base), path_is(base, "dir")
    if policy_enabled and hub is not None:
        inputs.hub_entry(hub, "model.base")
    elif policy_enabled and not local:
        fail("model.base", missing_path(base, "policy directory", hint="base: hub:"))
    return base if hub is None and local else []


def _check_trl(config: Mapping, arms: Mapping[str, Arm], workdir: Path) -> None:
    """What a trl arm's train job would refuse: a step's batch that does not split over the run's
    processes (train.trl.gpus on CUDA, train.trl.processes on the CPU) or a bnpo_rows that does
    not divide one process's share (backends.trl.config.split_error), and an
    accelerate_config file that is not there (the job passes it to accelerate launch, relative
    to the working directory)."""
    trl_arms = {name: arm for name, arm in arms.items() if arm.backend == "trl"}
    if not trl_arms:
        return
    train, trl = config["train"], launch_settings(config["train"].get("trl"))
    cuda = str(config["model"]["device"]).startswith("cuda")
    key = "gpus" if cuda else "processes"
    for name, arm in trl_arms.items():
        why = split_error(arm.dial, train["prompts_per_step"], train["group_size"], int(trl[key]))
        if why is not None:
            field, text = why
            fail(f"train.trl.{key}" if field == "processes" else f"dials.{name}.bnpo_rows", text)
    path = trl["accelerate_config"]
    if path is not None and not path_is(Path(workdir) / Path(path).expanduser(), "file"):
        fail(
            "train.trl.accelerate_config",
            f"{path!r} is not a file (resolved from the working directory {workdir})",
        )


def _check_runs(config: Mapping) -> None:
    """Each `runs` spec as external.importers.import_run reads it, before any file: only the
    keys its format's importer takes (its signature; `optional` is the workflow's); a generic
    run's `columns` (our fields, GENERIC_FIELDS) mapping step, prompt, response and reward or
    correct, and agreeing with reward_column / correct_column / correct_from; correct_from not
    contradicting correct_column; reward_weights one per entry of a list reward_column."""
    import inspect

    from grpo_dial.external.importers import GENERIC_FIELDS, IMPORTERS  # pandas, no torch

    for name, spec in config["runs"].items():
        where, fmt = f"runs.{name}", spec["format"]
        takes = [p for p in list(inspect.signature(IMPORTERS[fmt]).parameters)[1:] if p != "extra"]
        for key in spec:
            if key not in ("format", "path", "optional", *takes):
                fail(f"{where}.{key}", f"format {fmt} does not take {key}; it takes "
                     f"{', '.join(takes)}")  # fmt: skip
        correct, source = spec.get("correct_column"), "correct_column"
        if spec.get("correct_from") not in (None, "reward"):
            if correct is not None and correct != spec["correct_from"]:
                fail(f"{where}.correct_from", f"{spec['correct_from']!r} contradicts "
                     f"correct_column {correct!r}; give one of them")  # fmt: skip
            correct, source = spec["correct_from"], "correct_from"
        reward = spec.get("reward_column")
        if fmt == "generic":
            _check_columns(where, spec.get("columns"), reward, (correct, source), GENERIC_FIELDS)
            reward = spec["columns"].get("reward") if reward is None else reward
        weights = spec.get("reward_weights")
        if weights is not None and (not isinstance(reward, list) or len(reward) != len(weights)):
            n = len(weights)
            fail(f"{where}.reward_weights", f"one weight per reward column: {n} weight(s) "
                 f"need a reward_column list of {n}, got {reward!r}")  # fmt: skip


def _check_columns(where: str, columns, reward, correct: tuple, fields: tuple) -> None:
    """A generic run's `columns` (our field -> the file's column), as import_generic reads it."""
    valid = ", ".join(fields)
    if columns is None:
        fail(where, f"format generic needs columns (our field -> the file's column); fields: "
             f"{valid}")  # fmt: skip
    if unknown := sorted(set(columns) - set(fields), key=str):
        fail(f"{where}.columns", f"unknown field(s) {unknown}; valid: {valid}")
    columns = dict(columns)
    for ours, given, key in (("reward", reward, "reward_column"), ("correct", *correct)):
        if given is not None and columns.setdefault(ours, given) != given:
            fail(f"{where}.{key}", f"{given!r} disagrees with columns' {ours}: "
                 f"{columns[ours]!r}; give one of them")  # fmt: skip
    needed = [field for field in ("step", "prompt", "response") if field not in columns]
    if needed or not {"reward", "correct"} & set(columns):
        fail(f"{where}.columns", "must map step, prompt, response and reward or correct; missing "
             f"{', '.join(needed) or 'reward/correct'}")  # fmt: skip


def build_plan(config: Mapping, repo: Path, workdir: Path) -> Plan:
    """Check every input and arm of a validated config (defaults filled) and derive the DAG's
    lists. Raises ConfigError with one line on the first problem."""
    inputs = Inputs(config, repo, workdir)
    if POLICY_TABLE in config["passrate_tables"]:
        raise ConfigError(
            f"config error: '{POLICY_TABLE}' is reserved for the base policy's pass rates"
        )
    table_inputs = {
        name: inputs.table_input(name, spec) for name, spec in config["passrate_tables"].items()
    }
    policy_enabled = bool(config["dials"]) and config["train"]["steps"] > 0
    configured = [name for name, path in table_inputs.items() if path is not False]
    tables = configured + ([POLICY_TABLE] if policy_enabled else [])
    _check_tables(config, policy_enabled)
    if policy_enabled and config["model"]["base"] == "tiny":  # the warm-started tiny Llama
        _check_policy_settings(config)
    elif policy_enabled and warm_started(config):
        _check_style_weights(config)
    dapo = config["dapo_consistency"]
    dapo_curve = None
    if dapo["curve"] is not None and dapo["table"] in tables:
        dapo_curve = inputs.data_file(dapo["curve"], "dapo_consistency.curve", dapo["optional"])
    pretrained = _base_model(config, inputs, policy_enabled)
    base_model = f"{inputs.results}/policy/base" if warm_started(config) else pretrained
    the_task = task(config, inputs)
    arms = arm_checks.resolve_arms(config)
    if (why := backend_error(arms, config["train"]["max_new_tokens"])) is not None:
        raise ConfigError(why)  # a dial the trl backend cannot express
    if policy_enabled:
        _check_trl(config, arms, workdir)
    check_strata({n: a.dial.strata for n, a in arms.items() if a.dial.strata}, the_task)
    if policy_enabled:
        check_capacity(the_task, {
            "heldout": ("train.heldout_prompts", config["train"]["heldout_prompts"]),
            "train": ("pass_rates.pool", config["pass_rates"]["pool"]),
        })  # fmt: skip
    if config["train"]["lr_match"]["enabled"]:
        arm_checks.check_reference(
            "train.lr_match.reference", config["train"]["lr_match"]["reference"], arms
        )
    seeds = config["train"]["seeds"]
    real = config["real_lengths"]
    real_inputs = {
        name: path
        for name in ("math_cot", "gsm8k")
        if real[name] is not None
        and (path := inputs.data_file(real[name], f"real_lengths.{name}", real["optional"]))
        is not None
    }
    if real_inputs:
        inputs.local_dir(real["tokenizer"], "real_lengths.tokenizer", "tokenizer directory")
    channel_enabled = (
        policy_enabled
        and config["task"]["name"] == "arithmetic"
        and bool(config["task"]["options"].get("tail_checks", 0))
    )
    if channel_enabled:
        arm_checks.check_reference("channel.reference", config["channel"]["reference"], arms)
    aware = policy_enabled and config["task"]["name"] == "aware"
    if aware and (off := [n for n, a in arms.items() if a.backend != "own"]):
        raise ConfigError(
            f"config error at 'dials.{off[0]}.backend': the aware study trains its sweep cells "
            f"and probe in one process on the own trainer, not on {arms[off[0]].backend!r}; set "
            "backend: own"
        )
    pairs = arm_checks.allocation_pairs(arms) if policy_enabled else {}
    _check_runs(config)
    runs_external = [
        name
        for name, spec in config["runs"].items()
        if inputs.data_file(spec["path"], f"runs.{name}.path", spec["optional"]) is not None
    ]
    for name in runs_external:  # a tokenizer is read locally, never looked up on the hub
        tokenizer = config["runs"][name].get("tokenizer")
        inputs.local_dir(tokenizer or None, f"runs.{name}.tokenizer", "tokenizer directory")
    return Plan(
        inputs=inputs,
        table_inputs=table_inputs,
        tables=tables,
        sim_tables=[name for name in config["simulate"]["tables"] if name in tables],
        # base_policy only when the policy chain runs (the analysis half alone skips it)
        length_bias_tables=[name for name in config["length_bias"]["tables"] if name in tables],
        policy_enabled=policy_enabled,
        base_model=base_model,
        warm_start_from=pretrained if config["model"]["base"] != "tiny" else None,
        task=the_task,
        task_inputs=task_inputs(the_task),
        arms=arms,
        arm_fields=arm_checks.job_fields(arms),
        backends={name: arm.backend for name, arm in arms.items()},
        runs=[[name, seed] for name in arms for seed in seeds],
        stateful_arms=[name for name, arm in arms.items() if arm_checks.stateful(arm)],
        allocation_pairs=pairs,
        allocation_runs=[
            [name, seed] for name in dict.fromkeys([*pairs, *pairs.values()]) for seed in seeds
        ],
        real_length_inputs=real_inputs,
        dapo_curve=dapo_curve,
        channel_enabled=channel_enabled,
        aware_enabled=aware,
        aware_bridge=aware and "math_cot" in real_inputs,  # 8 samples of one model per prompt
        aware_later=_aware_later(config, arms, aware),
        runs_external=runs_external,
    )


def check_config(config: dict, configfiles: list, repo: Path) -> None:
    """The config files and values checked, then the schema validated (defaults filled into
    `config` in place): the checks of `open_plan` before its inputs and arms, which a command
    that reads a config without building the DAG (grpo-dial memory) shares. Raises ConfigError
    with one line naming the key or file of the first problem."""
    schema = read_schema(Path(repo) / SCHEMA)
    if (problem := config_problems(config, configfiles, schema)) is not None:
        raise ConfigError(problem)  # before the schema: duplicate keys, '1e-4' read as text, ...
    if (problem := config_error(config, schema)) is not None:
        raise ConfigError(problem)


def open_plan(config: dict, configfiles: list, repo: Path, workdir: Path) -> Plan:
    """The config's one door at DAG build: the schema read once, the config files and values
    checked, the schema validated (defaults filled into `config` in place; `check_config`),
    then `build_plan`. Raises ConfigError with one line naming the key or file of the first
    problem."""
    check_config(config, configfiles, repo)
    return build_plan(config, Path(repo), Path(workdir))


def section(values: Mapping, skip: tuple[str, ...]) -> dict:
    """A config section without its workflow-only keys (what a job's library call takes)."""
    return {key: value for key, value in values.items() if key not in skip}

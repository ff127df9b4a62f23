"""Rollouts logged by other GRPO trainers, read into the project's per-response schema.

Output: one row per response, columns RESPONSE_COLUMNS, sorted by step (log order within it):

    step            int    training step (TRL: the first file the rows appear in)
    prompt_id       str    "p-" + first 12 hex of sha1(prompt text): stable across runs and files
    prompt          str    prompt text;  response  str  what the policy generated (log_files)
    group           int    index of the group within its step, in order of first appearance
                           (groups.assign_groups: a prompt's responses within a step, a repeated
                           prompt cut into groups of G where the log keeps the order)
    k, G            int    correct responses and size of the response's group
    raw_reward      float  the logged reward (NaN where only a correctness column is logged)
    reward          float  1.0 if correct else 0.0 (what decompose and external expect)
    correct         bool   from the CorrectRule (correctness.py)
    length          int    tokens when a tokenizer is given, else characters of the response
    advantage       float  the logged advantage, NaN when not logged
    difficulty      str    from a `difficulty` column when the log has one, else NA
    work, redundant float  NaN (no task-specific split for foreign runs)
    resample_round  int    0

Bad input: a missing file or column, or an unreadable file, raises a one-line ValueError naming
it. Rows are skipped and counted by reason in the ImportReport, with where the first of each
occurred: repeated (TRL: a row of an earlier file written again, trl_snapshots), eval (TRL: rows
of an evaluation), validation (verl: a validation dump, told by its `reward` key equal to
`score`), invalid_json (a line that is not a JSON object, or nested too deep to parse),
missing_value (a needed field absent or null), bad_step (not an integer, or beyond +-2^53),
bad_text (prompt or response neither a string nor a message list), bad_reward (not a finite
number), bad_correct (not boolean or 0/1). A run with no usable row raises, naming the first bad
one.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from grpo_dial.external.correctness import (
    CorrectRule,
    RewardColumn,
    make_rule,
    reward_columns,
    reward_series,
)
from grpo_dial.external.log_files import (
    TABLE_SUFFIXES,
    ImportReport,
    read_file,
    require,
    step_order,
    unreadable,
)
from grpo_dial.external.responses import RESPONSE_COLUMNS, assemble, no_rows  # noqa: F401 (re-exported)
from grpo_dial.external.trl_snapshots import every_eval_steps, logged_eval_steps, split_snapshots

GENERIC_FIELDS = ("step", "prompt", "response", "reward", "correct", "advantage", "difficulty")
_FIELDS = ("step", "prompt", "response", "advantage", "difficulty")
_OPTIONAL = {"advantage": "advantage", "difficulty": "difficulty"}
_NO_ACC = (
    "correct_from; verl drops reward extra-info keys whose length differs from the batch, as the "
    "DAPO recipe's filtered batch does: use correct_from reward (threshold -1 for math_dapo's "
    "+-1 score)"
)


def _advantage(column: str | None) -> dict[str, str]:
    """The optional fields' file columns: `advantage` read from `column` when one is named."""
    return _OPTIONAL | ({"advantage": column} if column else {})


def _optional(column: str | None) -> tuple[str, ...]:
    """The fields a file may lack: a named advantage column is required."""
    return tuple(f for f in _OPTIONAL if not (f == "advantage" and column))


def _read(
    files: list[Path], report: ImportReport, needs: Mapping[str, str], step_from_name: bool
) -> list[tuple[Path, pd.DataFrame]]:
    """Each file's rows (files whose every line was skipped left out), columns checked."""
    frames = []
    for path in files:
        df = read_file(path, report)
        if len(df) == 0 and path.suffix in (".jsonl", ".json"):
            continue  # every line was skipped: nothing to check
        require(df, path, needs)
        if step_from_name:  # verl: the step key, else the file name
            from_name = float(path.stem) if path.stem.isdigit() else np.nan
            df["step"] = df["step"].fillna(from_name) if "step" in df.columns else from_name
        frames.append((path, df))
    return [(p, f) for p, f in frames if len(f)]


def _needs(names: Mapping[str, str], rule: CorrectRule, optional: Iterable[str]) -> dict:
    needs = {c: f"for {f}" for f, c in names.items() if f not in optional}
    reward = rule.reward_column
    needs |= {c: "reward" for c in ([reward] if isinstance(reward, str) else reward or [])}
    return needs | ({rule.correct_column: "correct_from"} if rule.correct_column else {})


def _finish(
    raw: pd.DataFrame,
    report: ImportReport,
    names: Mapping[str, str],
    rule: CorrectRule,
    tokenizer: object | None,
    grouping: tuple[int | None, bool],
    auto_reward: bool = True,
    extra: Sequence[str] = (),
) -> tuple[pd.DataFrame, ImportReport]:
    """Pick the reward, clean, group. names: our field -> file column; `extra` columns are
    carried through as they are."""
    if len(raw) == 0:
        raise no_rows(report)
    raw = raw.reset_index(drop=True)
    cols = None
    if auto_reward or rule.reward_column is not None:
        known = [c for c in (*names.values(), *extra) if c in raw.columns]  # never a reward
        cols = reward_columns(raw.drop(columns=known), rule, report.source)
    fields = {f: raw[names[f]] if names.get(f) in raw.columns else None for f in _FIELDS}
    fields["raw_reward"] = reward_series(raw, cols, rule)
    fields["correct"] = raw[rule.correct_column] if rule.correct_column else None
    fields |= {c: raw[c] for c in extra}
    overlong = rule.correct_column is None and "overlong_reward" in raw.columns
    report.notes.append(rule.describe(cols, overlong))
    return assemble(fields, raw["_loc"], rule, tokenizer, report, grouping, extra)


# --------------------------------------------------------------------------- importers


def import_trl(
    directory: str | Path,
    reward_column: RewardColumn = None,
    threshold: float = 0.0,
    correct_column: str | None = None,
    tokenizer: object | None = None,
    correct_from: str | None = None,
    reward_weights: Sequence[float] | None = None,
    group_size: int | None = None,
    eval_steps: int | Sequence[int] | None = None,
    extra: Sequence[str] = (),
    advantage_column: str | None = None,
) -> tuple[pd.DataFrame, ImportReport]:
    """TRL GRPOTrainer(log_completions=True) logs: `<output_dir>/completions/completions_<step>
    .parquet` (give the run dir or the completions dir), columns step, prompt, completion, one per
    reward function (named after it), extra columns, advantage. Rows written again by a later
    log() are dropped as repeated, evaluation rows as eval (trl_snapshots): the evaluated steps
    come from `eval_steps` (GRPOConfig.eval_steps, or a list), else trainer_state.json, and
    are also inferred from the files. Several reward columns: name one, or a list to sum with
    `reward_weights` (GRPOConfig.reward_weights). `extra`: logged columns (a reward function's
    log_extra) to carry through after RESPONSE_COLUMNS (the trl train backend's)."""
    rule = make_rule(reward_column, threshold, correct_column, correct_from, reward_weights)
    root = Path(directory)
    root = root / "completions" if (root / "completions").is_dir() else root
    if not root.is_dir():
        raise ValueError(f"TRL completions directory not found: {directory}")
    files = sorted(root.rglob("completions_*.parquet"), key=step_order)
    if not files:
        raise ValueError(f"no completions_<step>.parquet files under {root}")
    names = {"step": "step", "prompt": "prompt", "response": "completion"} | _advantage(
        advantage_column
    )
    report = ImportReport(source=f"trl:{directory}")
    needs = _needs(names, rule, _optional(advantage_column)) | {c: "extra" for c in extra}
    frames = _read(files, report, needs, step_from_name=False)
    steps = [step_order(path)[0] for path, _ in frames]
    if eval_steps is not None:
        evaluated, source = every_eval_steps(eval_steps, steps), "eval_steps"
    else:
        state_dir = root.parent if root.name == "completions" else root
        evaluated, source = logged_eval_steps(state_dir), "trainer_state.json"
    snap = split_snapshots(list(zip(steps, (f for _, f in frames), strict=True)), evaluated, source)
    report.skip("repeated", snap.repeated, snap.first_repeat)
    report.skip("eval", snap.eval_rows, snap.first_eval)
    report.notes.append(
        f"eval steps {snap.eval_steps or 'none'} (from {snap.eval_source})"
        + (f", {snap.lost_train_rows} training row(s) overwritten" if snap.lost_train_rows else "")
    )
    return _finish(snap.rows, report, names, rule, tokenizer, (group_size, True), True, extra)


def _is_validation(df: pd.DataFrame) -> bool:
    """verl's `_validate` adds reward_extra_infos_dict["reward"] = the scores to its dump."""
    if "reward" not in df.columns or "score" not in df.columns:
        return False
    reward = pd.to_numeric(df["reward"], errors="coerce").to_numpy(dtype=float)
    score = pd.to_numeric(df["score"], errors="coerce").to_numpy(dtype=float)
    return bool(np.allclose(reward, score, equal_nan=True))


def import_verl(
    directory: str | Path,
    reward_column: RewardColumn = "score",
    threshold: float = 0.0,
    correct_column: str | None = None,
    tokenizer: object | None = None,
    correct_from: str | None = None,
    reward_weights: Sequence[float] | None = None,
    group_size: int | None = None,
    advantage_column: str | None = None,
) -> tuple[pd.DataFrame, ImportReport]:
    """verl rollouts dumped with `trainer.rollout_data_dir`: `<dir>/<step>.jsonl`, one JSON object
    per response with keys input (prompt), output (response), gts, score, step, plus the reward
    manager's extra keys of the batch's length (e.g. acc, overlong_reward). The step is the
    `step` key, else the file name. Validation dumps (`trainer.validation_data_dir`, the same
    names, a `reward` key equal to `score`, val_kwargs.n samples) are skipped as validation."""
    rule = make_rule(reward_column, threshold, correct_column, correct_from, reward_weights)
    root = Path(directory)
    if not root.is_dir():
        raise ValueError(f"verl rollout directory not found: {directory}")
    files = sorted(root.glob("*.jsonl"), key=step_order)
    if not files:
        raise ValueError(f"no <step>.jsonl files in {root}")
    names = {"step": "step", "prompt": "input", "response": "output", "gts": "gts"} | _advantage(
        advantage_column
    )
    report = ImportReport(source=f"verl:{directory}")
    needs = _needs(names, rule, (*_optional(advantage_column), "gts", "step"))
    if rule.correct_column:
        needs[rule.correct_column] = _NO_ACC
    frames = _read(files, report, {k: v for k, v in needs.items() if k != "score"}, True)
    train = [(p, f) for p, f in frames if not _is_validation(f)]
    val_steps = []
    for path, f in (x for x in frames if _is_validation(x[1])):
        report.skip("validation", len(f), str(f["_loc"].iloc[0]))
        val_steps.append(step_order(path)[0])
    if val_steps:
        report.notes.append(
            f"validation dumps at steps {val_steps} (training dumps of those steps, if written to "
            "the same folder, were overwritten)"
        )
    if frames and not train:
        raise ValueError(
            f"{root} holds only verl validation dumps (a 'reward' key equal to 'score', "
            "written by trainer.validation_data_dir): point at trainer.rollout_data_dir"
        )
    for path, f in train:
        require(f, path, {k: v for k, v in needs.items() if k == "score"})
    raw = pd.concat([f for _, f in train], ignore_index=True) if train else pd.DataFrame()
    return _finish(raw, report, names, rule, tokenizer, (group_size, False))


def import_generic(
    path: str | Path,
    columns: Mapping[str, str],
    reward_column: RewardColumn = None,
    threshold: float = 0.0,
    correct_column: str | None = None,
    tokenizer: object | None = None,
    correct_from: str | None = None,
    reward_weights: Sequence[float] | None = None,
    group_size: int | None = None,
) -> tuple[pd.DataFrame, ImportReport]:
    """Any trainer's log: a CSV, parquet or JSON-lines (.jsonl/.json) file, or a directory of
    them (read in name order), one row per response. `columns` maps our fields to the file's
    column names: step, prompt, response (required), reward and/or correct (at least one),
    advantage, difficulty (optional). reward_column / correct_column, if given, must agree with
    the mapping (the same setting, accepted for a uniform config)."""
    columns = dict(columns)
    if unknown := sorted(set(columns) - set(GENERIC_FIELDS)):
        valid = ", ".join(GENERIC_FIELDS)
        raise ValueError(f"unknown field(s) {unknown} in columns; valid: {valid}")
    if correct_from not in (None, "reward"):
        correct_column = correct_column or correct_from
    for ours, given in (("reward", reward_column), ("correct", correct_column)):
        if given is not None and columns.setdefault(ours, given) != given:
            raise ValueError(
                f"columns maps {ours!r} to {columns[ours]!r} but {ours}_column is {given!r}"
            )
    needed = [f for f in ("step", "prompt", "response") if f not in columns]
    if needed or not ({"reward", "correct"} & set(columns)):
        raise ValueError(
            "columns must map step, prompt, response and reward or correct; "
            f"missing {', '.join(needed) or 'reward/correct'}"
        )
    rule = make_rule(columns.get("reward"), threshold, columns.get("correct"), None, reward_weights)
    source = Path(path)
    if source.is_dir():
        files = sorted(p for p in source.iterdir() if p.suffix in TABLE_SUFFIXES)
        if not files:
            raise ValueError(f"no {', '.join(TABLE_SUFFIXES)} files in {source}")
    elif source.is_file():
        files = [source]
    else:
        raise ValueError(f"file not found: {source}")
    names = {f: c for f, c in columns.items() if f not in ("reward", "correct")}
    report = ImportReport(source=f"generic:{path}")
    frames = _read(files, report, _needs(names, rule, ()), step_from_name=False)
    raw = pd.concat([f for _, f in frames], ignore_index=True) if frames else pd.DataFrame()
    return _finish(raw, report, names, rule, tokenizer, (group_size, False), auto_reward=False)


IMPORTERS: Mapping[str, Callable[..., tuple[pd.DataFrame, ImportReport]]] = {
    "trl": import_trl,
    "verl": import_verl,
    "generic": import_generic,
}


def _load_tokenizer(path: str | Path) -> object:
    path = Path(path)
    if not path.exists():
        raise ValueError(f"tokenizer path not found: {path}")
    from transformers import AutoTokenizer  # heavy import, only when a tokenizer is named

    try:
        return AutoTokenizer.from_pretrained(str(path))
    except Exception as err:  # transformers raises OSError, ValueError, KeyError, ...
        raise unreadable(path, err) from None


def import_run(spec: Mapping) -> tuple[pd.DataFrame, ImportReport]:
    """Import one run from a spec {format: trl | verl | generic, path: ..., options}; options are
    the importer's keywords (reward_column, threshold, correct_column, columns for generic) and
    tokenizer = a local tokenizer directory (loaded with transformers.AutoTokenizer; an already
    built tokenizer object is passed through)."""
    if not isinstance(spec, Mapping) or "format" not in spec:
        raise ValueError(f"run spec needs a 'format' (one of {', '.join(IMPORTERS)}), got {spec!r}")
    fmt = spec["format"]
    if fmt not in IMPORTERS:
        raise ValueError(f"unknown run format {fmt!r}; valid: {', '.join(IMPORTERS)}")
    importer = IMPORTERS[fmt]
    params = list(inspect.signature(importer).parameters)
    valid = ["format", "path", *(p for p in params[1:] if p != "extra")]
    unknown = sorted(set(spec) - set(valid))
    if unknown:
        raise ValueError(
            f"unknown key(s) {', '.join(unknown)} for format {fmt!r}; valid: {', '.join(valid)}"
        )
    if "path" not in spec:
        raise ValueError(f"run spec of format {fmt!r} needs 'path'")
    kwargs = {k: v for k, v in spec.items() if k not in ("format", "path")}
    if fmt == "generic" and "columns" not in kwargs:
        raise ValueError("run spec of format 'generic' needs 'columns' (our field -> file column)")
    if isinstance(kwargs.get("tokenizer"), str | Path):
        kwargs["tokenizer"] = _load_tokenizer(kwargs["tokenizer"])
    return importer(spec["path"], **kwargs)

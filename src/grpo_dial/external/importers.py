"""Rollouts logged by other GRPO trainers, read into the project's per-response schema.

Output: one row per response, columns RESPONSE_COLUMNS, sorted by step (file order within it):

    step            int    training step
    prompt_id       str    "p-" + first 12 hex of sha1(prompt text): stable across runs and files
    prompt          str    prompt text;  response  str  response text
    group           int    index of the (step, prompt) group within its step, in order of first
                           appearance (a group = the responses to one prompt within one step)
    k, G            int    correct responses and size of the response's group
    raw_reward      float  the logged reward (NaN where only a correctness column is logged)
    reward          float  1.0 if correct else 0.0 (what decompose and external expect)
    correct         bool   from the CorrectRule
    length          int    tokens when a tokenizer is given, else characters of the response
    advantage       float  the logged advantage, NaN when not logged
    difficulty      str    from a `difficulty` column when the log has one, else NA
    work, redundant float  NaN (no task-specific split for foreign runs)
    resample_round  int    0

Correctness (CorrectRule): correct iff reward > threshold (threshold 0 suits 0/1 and +-1
rewards), or read from a boolean / 0-1 column (`correct_column`). The reward column is the named
one, else the only reward-like column (numeric, not boolean, not step/advantage/difficulty/the
correctness column), else an error listing the candidates. A list of columns names their sum
(TRL's total reward with unit weights; NaN entries count 0, all-NaN stays NaN, as TRL's nansum).

Text: a string as is; a conversational value (a list of {"role", "content"} messages) is the
message contents joined by "\\n" (roles dropped; a content given as a list of parts contributes
the parts' "text").

Bad input: a missing file or column, or an unreadable file, raises a one-line ValueError naming
it. Malformed rows are skipped and counted by reason in the ImportReport, with where the first
of each occurred: invalid_json (a line that is not a JSON object), missing_value (a needed
field absent or null), bad_step (not an integer), bad_text (prompt or response neither a string
nor a message list), bad_reward (not a finite number), bad_correct (not boolean or 0/1), and
not_train (TRL rows logged in eval mode). A run with no usable row raises, naming the first bad.
"""

from __future__ import annotations

import hashlib
import inspect
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from grpo_dial.external.log_files import (
    TABLE_SUFFIXES,
    ImportReport,
    as_bool,
    as_text,
    read_file,
    require,
    step_order,
    token_counter,
    unreadable,
)

RESPONSE_COLUMNS = (
    "step", "prompt_id", "prompt", "response", "group", "k", "G", "raw_reward", "reward",
    "correct", "length", "advantage", "difficulty", "work", "redundant", "resample_round",
)  # fmt: skip
GENERIC_FIELDS = ("step", "prompt", "response", "reward", "correct", "advantage", "difficulty")
# checked in this order; a row is counted under its first failing reason
REASONS = ("missing_value", "bad_step", "bad_text", "bad_reward", "bad_correct")
_NOT_REWARD = ("step", "advantage", "difficulty", "mode", "_loc")
_FIELDS = ("step", "prompt", "response", "advantage", "difficulty")
_OPTIONAL = {"advantage": "advantage", "difficulty": "difficulty"}

RewardColumn = str | Sequence[str] | None


@dataclass(frozen=True)
class CorrectRule:
    """How correctness is read from a log.

    reward_column: the logged reward column; None = the only reward-like column; a list of
        columns = their sum (e.g. TRL's total over several reward functions).
    threshold: correct iff reward > threshold (0.0 fits 0/1 and +-1 rewards; use e.g. 0.5 for a
        reward that adds a format bonus to a 0/1 accuracy).
    correct_column: a boolean / 0-1 column naming correctness directly; overrides the threshold.
    """

    reward_column: RewardColumn = None
    threshold: float = 0.0
    correct_column: str | None = None

    def __post_init__(self) -> None:
        try:
            threshold = float(self.threshold)
        except (TypeError, ValueError):
            raise ValueError(f"threshold must be a number, got {self.threshold!r}") from None
        if math.isnan(threshold):
            raise ValueError("threshold must not be NaN")
        object.__setattr__(self, "threshold", threshold)  # "0" from a YAML string -> 0.0


def _prompt_ids(prompts: pd.Series) -> np.ndarray:
    codes, uniques = pd.factorize(prompts)
    hashed = np.array(
        ["p-" + hashlib.sha1(t.encode("utf-8")).hexdigest()[:12] for t in uniques], dtype=object
    )
    return hashed[codes]  # (N,)


def _reward_columns(df: pd.DataFrame, rule: CorrectRule, where: str) -> list[str] | None:
    """The columns whose (sum) is the reward; None when only correctness is logged."""
    if rule.reward_column is not None:
        cols = [rule.reward_column] if isinstance(rule.reward_column, str) else rule.reward_column
        return list(cols)
    skip = (*_NOT_REWARD, rule.correct_column)
    candidates = [
        c
        for c in df.columns
        if c not in skip
        and pd.api.types.is_numeric_dtype(df[c])
        and not pd.api.types.is_bool_dtype(df[c])
    ]
    if len(candidates) == 1:
        return candidates
    if not candidates and rule.correct_column is not None:
        return None
    raise ValueError(
        f"{where}: name the reward column (reward_column); "
        + (f"candidates: {', '.join(candidates)}" if candidates else "no numeric column found")
        + " (a list of columns sums them)"
    )


def _assemble(
    fields: Mapping[str, pd.Series | None],
    loc: pd.Series,
    rule: CorrectRule,
    tokenizer: object | None,
    report: ImportReport,
) -> tuple[pd.DataFrame, ImportReport]:
    """Clean the raw fields (step, prompt, response, raw_reward, correct, advantage, difficulty;
    None = not logged), skip and count bad rows, and build the RESPONSE_COLUMNS table."""
    n, loc = len(loc), loc.to_numpy()
    raw = {k: None if v is None else v.reset_index(drop=True) for k, v in fields.items()}
    by_flag = rule.correct_column is not None

    def numeric(name: str) -> np.ndarray:
        if raw[name] is None:
            return np.full(n, np.nan)
        return pd.to_numeric(raw[name], errors="coerce").to_numpy(dtype=float)  # (N,)

    df = pd.DataFrame({"step": numeric("step"), "raw_reward": numeric("raw_reward")})
    df["prompt"] = raw["prompt"].map(as_text).astype(object)
    df["response"] = raw["response"].map(as_text).astype(object)
    df["correct"] = raw["correct"].map(as_bool).astype(object) if by_flag else None
    df["advantage"] = numeric("advantage")
    df["difficulty"] = pd.NA if raw["difficulty"] is None else raw["difficulty"]
    needed = ["step", "prompt", "response", "correct" if by_flag else "raw_reward"]
    checks = {  # (N,) each; True = the row fails
        "missing_value": np.any([raw[c].isna().to_numpy() for c in needed], axis=0),
        "bad_step": ~np.isfinite(df["step"]) | (df["step"] % 1 != 0),
        "bad_text": df["prompt"].isna() | df["response"].isna(),
        "bad_reward": ~by_flag & ~np.isfinite(df["raw_reward"]),
        "bad_correct": by_flag & df["correct"].isna(),
    }
    keep = np.ones(n, bool)
    for reason in REASONS:
        hit = keep & np.asarray(checks[reason], bool)
        if hit.any():
            report.skip(reason, hit.sum(), str(loc[np.flatnonzero(hit)[0]]))
        keep &= ~hit
    if not keep.any():
        first = ", ".join(f"{r} at {w}" for r, w in report.first_skipped.items()) or "no rows"
        raise ValueError(f"{report.source}: no usable rows ({first})")
    df = df[keep].sort_values("step", kind="stable").reset_index(drop=True)
    df["step"] = df["step"].astype(np.int64)
    ok = df["correct"].astype(bool) if by_flag else df["raw_reward"] > rule.threshold
    df["correct"], df["reward"] = ok.to_numpy(), ok.to_numpy(dtype=float)
    count = len if tokenizer is None else token_counter(tokenizer)
    df["length"] = np.fromiter(map(count, df["response"]), np.int64, len(df))
    df["difficulty"] = df["difficulty"].astype("string")
    df["prompt_id"] = _prompt_ids(df["prompt"])
    by_group = df.groupby(["step", "prompt_id"], sort=False)
    gid = by_group.ngroup()  # numbered by first appearance; steps are sorted, so per step too
    df["group"] = (gid - gid.groupby(df["step"]).transform("min")).astype(np.int64)
    df["k"] = by_group["correct"].transform("sum").astype(np.int64)
    df["G"] = by_group["correct"].transform("size").astype(np.int64)
    df["work"] = df["redundant"] = np.nan
    df["resample_round"] = np.int64(0)
    report.rows_kept = len(df)
    return df[list(RESPONSE_COLUMNS)], report


def _reward_series(df: pd.DataFrame, cols: list[str] | None) -> pd.Series | None:
    if cols is None:
        return None
    if len(cols) == 1:
        return df[cols[0]]
    values = df[cols].apply(pd.to_numeric, errors="coerce")
    return values.sum(axis=1, min_count=1)  # TRL's nansum; all-NaN stays NaN (skipped)


def _import(
    files: list[Path],
    report: ImportReport,
    names: Mapping[str, str],
    rule: CorrectRule,
    tokenizer: object | None,
    optional: tuple[str, ...] = ("advantage", "difficulty", "gts"),
    auto_reward: bool = True,
    step_from_name: bool = False,
    train_only: bool = False,
) -> tuple[pd.DataFrame, ImportReport]:
    """Read the files, check columns, pick the reward, clean. names: our field -> file column
    (step, prompt, response, advantage, difficulty; `optional` ones are used when present)."""
    reward = rule.reward_column
    needs = {c: f"for {f}" for f, c in names.items() if f not in optional}
    if step_from_name:
        needs.pop(names["step"])
    needs |= {c: "reward" for c in ([reward] if isinstance(reward, str) else reward or [])}
    needs |= {rule.correct_column: "correct_column"} if rule.correct_column else {}
    frames = []
    for path in files:
        df = read_file(path, report)
        if len(df) == 0 and path.suffix in (".jsonl", ".json"):
            continue  # every line was skipped: nothing to check
        require(df, path, needs)
        if step_from_name:  # verl: the step key, else the file name
            from_name = float(path.stem) if path.stem.isdigit() else np.nan
            df["step"] = df["step"].fillna(from_name) if "step" in df.columns else from_name
        frames.append(df)
    frames = [f for f in frames if len(f)]
    if not frames:
        first = ", ".join(f"{r} at {w}" for r, w in report.first_skipped.items()) or "no rows"
        raise ValueError(f"{report.source}: no usable rows ({first})")
    raw = pd.concat(frames, ignore_index=True)
    if train_only and "mode" in raw.columns:
        evals = (raw["mode"].notna() & (raw["mode"].astype(str) != "train")).to_numpy()
        if evals.any():
            report.skip("not_train", evals.sum(), str(raw["_loc"][evals].iloc[0]))
        raw = raw[~evals].reset_index(drop=True)
    cols = None
    if auto_reward or reward is not None:
        known = [c for c in names.values() if c in raw.columns]  # never a reward candidate
        cols = _reward_columns(raw.drop(columns=known), rule, report.source)
    fields = {f: raw[names[f]] if names.get(f) in raw.columns else None for f in _FIELDS}
    fields["raw_reward"] = _reward_series(raw, cols)
    fields["correct"] = raw[rule.correct_column] if rule.correct_column else None
    return _assemble(fields, raw["_loc"], rule, tokenizer, report)


# --------------------------------------------------------------------------- importers


def import_trl(
    directory: str | Path,
    reward_column: RewardColumn = None,
    threshold: float = 0.0,
    correct_column: str | None = None,
    tokenizer: object | None = None,
) -> tuple[pd.DataFrame, ImportReport]:
    """TRL GRPOTrainer(log_completions=True) logs: `<output_dir>/completions/**/completions_<step>
    .parquet` (give the run dir or the completions dir), columns step, prompt, completion, one per
    reward function (named after it), extra columns, advantage, and in newer TRL `mode` (only
    "train" rows are kept). Several reward columns: name one, or a list to sum."""
    rule = CorrectRule(reward_column, threshold, correct_column)
    root = Path(directory)
    root = root / "completions" if (root / "completions").is_dir() else root
    if not root.is_dir():
        raise ValueError(f"TRL completions directory not found: {directory}")
    files = sorted(root.rglob("completions_*.parquet"), key=step_order)
    if not files:
        raise ValueError(f"no completions_<step>.parquet files under {root}")
    names = {"step": "step", "prompt": "prompt", "response": "completion"} | _OPTIONAL
    report = ImportReport(source=f"trl:{directory}")
    return _import(files, report, names, rule, tokenizer, train_only=True)


def import_verl(
    directory: str | Path,
    reward_column: RewardColumn = "score",
    threshold: float = 0.0,
    correct_column: str | None = None,
    tokenizer: object | None = None,
) -> tuple[pd.DataFrame, ImportReport]:
    """verl rollouts dumped with `trainer.rollout_data_dir`: `<dir>/<step>.jsonl`, one JSON object
    per response with keys input (prompt), output (response), gts, score, step, plus any extra
    reward keys (e.g. acc). The step is the `step` key, else the file name."""
    rule = CorrectRule(reward_column, threshold, correct_column)
    root = Path(directory)
    if not root.is_dir():
        raise ValueError(f"verl rollout directory not found: {directory}")
    files = sorted(root.glob("*.jsonl"), key=step_order)
    if not files:
        raise ValueError(f"no <step>.jsonl files in {root}")
    names = {"step": "step", "prompt": "input", "response": "output", "gts": "gts"} | _OPTIONAL
    report = ImportReport(source=f"verl:{directory}")
    return _import(files, report, names, rule, tokenizer, step_from_name=True)


def import_generic(
    path: str | Path,
    columns: Mapping[str, str],
    reward_column: RewardColumn = None,
    threshold: float = 0.0,
    correct_column: str | None = None,
    tokenizer: object | None = None,
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
    rule = CorrectRule(columns.get("reward"), threshold, columns.get("correct"))
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
    return _import(files, report, names, rule, tokenizer, optional=(), auto_reward=False)


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
    valid = ["format", "path", *params[1:]]
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

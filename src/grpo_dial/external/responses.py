"""The per-response table of an imported run: clean the raw fields, skip and count bad rows,
read correctness, count lengths, form groups (the schema is in importers' docstring).

Checks, in order, a row counted under its first failing reason: missing_value, bad_step,
bad_text, bad_reward, bad_correct. Text: log_files.as_text names the prompt, generated_text is
the response (what the length counts).
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from grpo_dial.external.correctness import CorrectRule
from grpo_dial.external.groups import assign_groups, modal_size
from grpo_dial.external.log_files import (
    ImportReport,
    as_bool,
    as_text,
    generated_text,
    token_counter,
    tool_outputs,
)

RESPONSE_COLUMNS = (
    "step", "prompt_id", "prompt", "response", "group", "k", "G", "raw_reward", "reward",
    "correct", "length", "advantage", "difficulty", "work", "redundant", "resample_round", "lost",
)  # fmt: skip
# lost: rows of this response's (step, prompt) group that the import skipped (0 = group whole)
# checked in this order; a row is counted under its first failing reason
REASONS = ("missing_value", "bad_step", "bad_text", "bad_reward", "bad_correct")
MAX_STEP = 2**53  # the largest integer every float64 below it holds exactly

log = logging.getLogger("grpo_dial")


def _prompt_ids(prompts: pd.Series) -> np.ndarray:
    codes, uniques = pd.factorize(prompts)
    hashed = np.array(
        ["p-" + hashlib.sha1(t.encode("utf-8")).hexdigest()[:12] for t in uniques], dtype=object
    )
    return hashed[codes]  # (N,)


DROP_WARN = 0.03  # share of skipped rows above which the import warns: groups lose members


def _checked_grouping(
    step: pd.Series, prompt: pd.Series, keep: np.ndarray, grouping: tuple, report: ImportReport
) -> tuple[tuple[int | None, bool], np.ndarray]:
    """Warn when more than DROP_WARN of the rows were skipped (their groups lose members, so G
    and the silent fractions shift), and without a declared G take it from the groups that lost
    no row; with none left, say G is uncertain. Also returns, per row, how many rows of its
    (step, prompt) group were skipped (N,)."""
    n, kept = len(keep), int(keep.sum())
    key = pd.DataFrame({"step": step.astype(str), "prompt": prompt.map(repr)})
    lost = (~pd.Series(keep)).groupby([key["step"], key["prompt"]]).transform("sum")
    lost = lost.to_numpy(np.int64)  # (N,)
    if n and (n - kept) / n > DROP_WARN:
        log.warning(
            "%s: %d of %d rows (%.0f%%) skipped as unusable (%s); groups with a skipped row are "
            "smaller than G, so silent fractions are computed on what is left",
            report.source or "import", n - kept, n, 100 * (n - kept) / n,
            ", ".join(f"{r}: {c}" for r, c in report.skipped.items()),
        )  # fmt: skip
    if grouping[0] is not None or kept == n:
        return grouping, lost
    whole = key[lost == 0]
    if whole.empty:
        report.notes.append("G from no group: every group lost a row, so G is uncertain")
        return grouping, lost
    sizes = whole.groupby(["step", "prompt"]).size()
    report.notes.append(f"G from the {len(sizes)} groups that lost no row")
    return (modal_size(sizes), grouping[1]), lost


def no_rows(report: ImportReport) -> ValueError:
    first = ", ".join(f"{r} at {w}" for r, w in report.first_skipped.items()) or "no rows"
    return ValueError(f"{report.source}: no usable rows ({first})")


def assemble(
    fields: Mapping[str, pd.Series | None],
    loc: pd.Series,
    rule: CorrectRule,
    tokenizer: object | None,
    report: ImportReport,
    grouping: tuple[int | None, bool],
    extra: Sequence[str] = (),
) -> tuple[pd.DataFrame, ImportReport]:
    """Clean the raw fields (step, prompt, response, raw_reward, correct, advantage, difficulty;
    None = not logged), skip and count bad rows, and build the RESPONSE_COLUMNS table.
    grouping = (declared G or None, whether the log keeps each group's rows together); `extra`
    fields are carried through as they are, after RESPONSE_COLUMNS."""
    n, loc = len(loc), loc.to_numpy()
    raw = {k: None if v is None else v.reset_index(drop=True) for k, v in fields.items()}
    by_flag = rule.correct_column is not None

    def numeric(name: str) -> np.ndarray:
        if raw[name] is None:
            return np.full(n, np.nan)
        return pd.to_numeric(raw[name], errors="coerce").to_numpy(dtype=float)  # (N,)

    df = pd.DataFrame({"step": numeric("step"), "raw_reward": numeric("raw_reward")})
    df["prompt"] = raw["prompt"].map(as_text).astype(object)
    df["response"] = raw["response"].map(generated_text).astype(object)
    df["correct"] = raw["correct"].map(as_bool).astype(object) if by_flag else None
    df["advantage"] = numeric("advantage")
    df["difficulty"] = pd.NA if raw["difficulty"] is None else raw["difficulty"]
    for name in extra:
        df[name] = raw[name]
    needed = ["step", "prompt", "response", "correct" if by_flag else "raw_reward"]
    checks = {  # (N,) each; True = the row fails
        "missing_value": np.any([raw[c].isna().to_numpy() for c in needed], axis=0),
        # an integer a float holds exactly (|step| <= 2^53): 1e30 would wrap in int64
        "bad_step": ~np.isfinite(df["step"]) | (df["step"] % 1 != 0)
        | (np.abs(df["step"]) > MAX_STEP),
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
        raise no_rows(report)
    grouping, lost = _checked_grouping(raw["step"], raw["prompt"], keep, grouping, report)
    df["lost"] = lost
    chats = raw["response"][keep].map(lambda v: not isinstance(v, str))
    tools = int(raw["response"][keep].map(tool_outputs).sum())
    df = df[keep].sort_values("step", kind="stable").reset_index(drop=True)
    df["step"] = df["step"].astype(np.int64)
    ok = df["correct"].astype(bool) if by_flag else df["raw_reward"] > rule.threshold
    df["correct"], df["reward"] = ok.to_numpy(), ok.to_numpy(dtype=float)
    count = len if tokenizer is None else token_counter(tokenizer)
    df["length"] = np.fromiter(map(count, df["response"]), np.int64, len(df))
    df["difficulty"] = df["difficulty"].astype("string")
    df["prompt_id"] = _prompt_ids(df["prompt"])
    group, size, n_split = assign_groups(df["step"], df["prompt_id"], *grouping)
    df["group"] = group
    by_group = df.groupby(["step", "group"], sort=False)
    df["k"] = by_group["correct"].transform("sum").astype(np.int64)
    df["G"] = by_group["correct"].transform("size").astype(np.int64)
    df["work"] = df["redundant"] = np.nan
    df["resample_round"] = np.int64(0)
    report.rows_kept = len(df)
    unit = "characters" if tokenizer is None else "tokens"
    declared = "declared" if grouping[0] else "most common"
    if report.notes and report.notes[-1].startswith("G from"):
        declared = report.notes.pop()  # G from the undamaged groups (or uncertain)
    split = f", {n_split} repeated prompt(s) split into groups of G" if grouping[1] else ""
    report.notes.append(f"G {size} ({declared}){split}")
    counted = "reasoning, content and tool calls of the assistant turns" if chats.any() else ""
    left_out = f"{tools} tool output message(s) left out" if tools else ""
    detail = "; ".join(x for x in (counted, left_out) if x)
    report.notes.append(
        f"length = {unit} of the generated text" + (f" ({detail})" if detail else "")
    )
    return df[[*RESPONSE_COLUMNS, *extra]], report

"""Length of correct against incorrect responses in real logged model outputs (no training).

Two public logs (see ../shared/data/README.md):
  math_cot_100   100 MATH problems x 8 Qwen2.5-Math chain-of-thought samples, scored; difficulty =
                 the MATH level, "level 1" .. "level 5".
  gsm8k          GSM8K test, 4 logged GPT-3 solutions per problem (6B / 175B, finetuned / verifier
                 selected); difficulty = "k=j", j of the 4 solutions correct. This is a proxy only:
                 it conditions on the very outcomes being compared, so a "k=0" problem has no
                 correct response and a "k=4" problem no incorrect one.

Both logs are read and validated by their data readers (data/math_cot.py, data/gsm8k.py), the
same rows the pass-rate tables keep. problem_id here is the log's line key "<log>:<line>", not the
problem's prompt_id (data/ids.py): the bootstrap orders clusters by problem_id, so switching keys
would redraw every interval of by_correctness.csv (point estimates unchanged).

Per group (default source x difficulty) with n_c correct responses of mean length L_c and n_w
incorrect of mean L_w: ratio = L_w / L_c and difference = L_w - L_c, with a percentile interval
from a bootstrap that resamples PROBLEMS within each group (responses of a problem are not
independent). Vectorized: every cluster slot j of group g draws a cluster of g uniformly, the
(B, clusters) count matrix C weights the per-cluster sums F (clusters, 4) and the group indicator
H (clusters, groups) sums them: per-group replicate sums = (C * F[:, f]) @ H.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from grpo_dial.analysis.training.decompose import percentile_interval
from grpo_dial.data.gsm8k import read_gsm8k_solutions
from grpo_dial.data.math_cot import read_math_cot
from grpo_dial.data.reading import LoadReport

MATH_COT = "math_cot_100"
GSM8K = "gsm8k"
RESPONSE_COLUMNS = (
    "source",
    "problem_id",
    "difficulty",
    "model",
    "correct",
    "length_chars",
)  # + "length_tokens" when a tokenizer is given
LBC_COLUMNS = (
    "n_problems n_correct n_incorrect n_problems_correct n_problems_incorrect mean_len_correct "
    "mean_len_incorrect ratio ratio_lo ratio_hi diff diff_lo diff_hi"
).split()
LBC_TOKEN_COLUMNS = (
    "mean_tokens_correct mean_tokens_incorrect ratio_tokens ratio_tokens_lo ratio_tokens_hi "
    "diff_tokens diff_tokens_lo diff_tokens_hi"
).split()
_UNITS = {"length_chars": "len", "length_tokens": "tokens"}


@dataclass(frozen=True)
class Loaded:
    """A loader's result: the per-response table and the problems it skipped (why, by line)."""

    responses: pd.DataFrame
    n_problems: int
    skipped: tuple[str, ...] = field(default=())

    @property
    def n_skipped(self) -> int:
        return len(self.skipped)


# --------------------------------------------------------------------------- loading


def _token_count(tokenizer: Any) -> Callable[[str], int]:
    """Token length of a text, without special tokens where the tokenizer supports that."""

    def ids_of(out: Any) -> Sequence[int]:
        return out["input_ids"] if isinstance(out, dict) or hasattr(out, "keys") else out

    if hasattr(tokenizer, "encode"):

        def count(text: str) -> int:
            try:
                return len(ids_of(tokenizer.encode(text, add_special_tokens=False)))
            except TypeError:  # a plain tokenizer without the HF keyword
                return len(ids_of(tokenizer.encode(text)))

    elif callable(tokenizer):

        def count(text: str) -> int:
            try:
                return len(ids_of(tokenizer(text, add_special_tokens=False)))
            except TypeError:
                return len(ids_of(tokenizer(text)))

    else:
        raise ValueError(f"tokenizer must have .encode or be callable, got {type(tokenizer)}")
    return count


def _loaded(
    logged: pd.DataFrame, report: LoadReport, source: str, difficulty: pd.Series, tokenizer: Any
) -> Loaded:
    """A reader's reading.LOGGED_COLUMNS table as RESPONSE_COLUMNS (+ length_tokens)."""
    texts = logged["response"].tolist()
    df = pd.DataFrame(
        {
            "source": source,
            "problem_id": source + ":" + logged["line"].astype(str),
            "difficulty": difficulty.to_numpy(dtype=object),
            "model": logged["model"].to_numpy(dtype=object),
            "correct": logged["correct"].to_numpy(dtype=bool),
            "length_chars": np.array([len(t) for t in texts], dtype=np.int64),
        },
        columns=list(RESPONSE_COLUMNS),
    )
    if tokenizer is not None:
        count = _token_count(tokenizer)
        df["length_tokens"] = np.array([count(t) for t in texts], dtype=np.int64)
    return Loaded(df, report.n_kept, tuple(report.skipped))


def load_math_cot_responses(path: str | Path, tokenizer: Any | None = None) -> Loaded:
    """math_cot_100.jsonl -> one row per sampled response (8 per problem), read and validated by
    data/math_cot.py (a skipped row is reported with its line and column); problem_id =
    "math_cot_100:<line>", difficulty = "level N"."""
    logged, report = read_math_cot(path)
    return _loaded(logged, report, MATH_COT, logged["difficulty"], tokenizer)


def load_gsm8k_responses(path: str | Path, tokenizer: Any | None = None) -> Loaded:
    """GSM8K example_model_solutions.jsonl -> one row per logged solution (4 per problem), read
    and validated by data/gsm8k.py; problem_id = "gsm8k:<line>", model = the solution's object
    name, difficulty = "k=j" with j of the 4 correct (a proxy; module docstring)."""
    logged, report = read_gsm8k_solutions(path)
    k = logged.groupby("prompt_id", sort=False)["correct"].transform("sum")  # (R,)
    return _loaded(logged, report, GSM8K, "k=" + k.astype(str), tokenizer)


# --------------------------------------------------------------------------- the comparison


def _stratified_counts(group_of: np.ndarray, n_boot: int, seed: int) -> np.ndarray:
    """(B, K) how often each of the K clusters is drawn when each group's clusters are
    resampled with replacement (group sizes kept); group_of (K,) sorted group codes."""
    k = len(group_of)
    size = np.bincount(group_of)  # (G,)
    start = np.concatenate([[0], np.cumsum(size)[:-1]])  # (G,)
    u = np.random.default_rng(seed).random((n_boot, k))  # (B, K)
    draw = start[group_of] + np.floor(u * size[group_of]).astype(np.int64)  # (B, K)
    flat = (np.arange(n_boot)[:, None] * k + draw).ravel()  # (B * K,)
    return np.bincount(flat, minlength=n_boot * k).reshape(n_boot, k).astype(float)


def length_by_correctness(
    responses: pd.DataFrame,
    by: Iterable[str] = ("source", "difficulty"),
    n_boot: int = 1000,
    seed: int = 0,
    level: float = 0.9,
) -> pd.DataFrame:
    """One row per group of `by` (columns: `by`, then LBC_COLUMNS, then LBC_TOKEN_COLUMNS when
    `length_tokens` is present). Means are over responses; ratio = mean incorrect / mean
    correct, diff = mean incorrect - mean correct, both NaN in a group without one class.
    _lo/_hi: percentile interval at `level` from resampling problems within the group; NaN
    unless at least 2 problems have a correct and 2 an incorrect response (with one, that
    class's mean never varies across replicates and the interval would be falsely narrow)."""
    by = list(by)
    if not by:
        raise ValueError("by must name at least one column, e.g. ('source',)")
    need = ["problem_id", "correct", "length_chars", *by]
    missing = [c for c in need if c not in responses.columns]
    if missing:
        raise ValueError(f"responses table lacks column(s) {missing}")
    if responses.empty:
        raise ValueError("responses table is empty")
    if n_boot < 1 or not 0 < level < 1:
        raise ValueError(f"need n_boot >= 1 and 0 < level < 1, got {n_boot}, {level}")
    units = [u for u in _UNITS if u in responses.columns]
    df = responses.reset_index(drop=True)
    c = df["correct"].astype(bool).to_numpy()  # (N,)
    group, keys = pd.factorize(pd.MultiIndex.from_frame(df[by]), sort=True)  # (N,), (G,)
    # a cluster = one problem inside one group (`by` may split a problem, e.g. by model)
    cluster, cl_keys = pd.factorize(pd.MultiIndex.from_arrays([group, df["problem_id"]]), sort=True)
    cl_group = cl_keys.get_level_values(0).to_numpy()  # (K,) sorted by group
    n_groups, n_cl = len(keys), len(cl_keys)
    counts = _stratified_counts(cl_group, n_boot, seed)  # (B, K)
    member = np.zeros((n_cl, n_groups))
    member[np.arange(n_cl), cl_group] = 1.0  # (K, G)

    def per_cluster(w: np.ndarray) -> np.ndarray:
        return np.bincount(cluster, weights=w, minlength=n_cl)  # (K,)

    out = pd.DataFrame(list(keys), columns=by)
    out["n_problems"] = np.bincount(cl_group, minlength=n_groups)
    n_c_cl, n_w_cl = per_cluster(c.astype(float)), per_cluster((~c).astype(float))
    out["n_correct"] = (n_c_cl @ member).astype(np.int64)
    out["n_incorrect"] = (n_w_cl @ member).astype(np.int64)
    out["n_problems_correct"] = ((n_c_cl > 0) @ member).astype(np.int64)
    out["n_problems_incorrect"] = ((n_w_cl > 0) @ member).astype(np.int64)
    # one problem carrying a class makes that class's mean constant across replicates
    has_ci = (out[["n_problems_correct", "n_problems_incorrect"]].min(axis=1) >= 2).to_numpy()
    with np.errstate(invalid="ignore", divide="ignore"):
        bn_c, bn_w = (counts * n_c_cl) @ member, (counts * n_w_cl) @ member  # (B, G)
        for col in units:
            u = _UNITS[col]
            x = df[col].to_numpy(dtype=float)  # (N,)
            s_c, s_w = per_cluster(np.where(c, x, 0.0)), per_cluster(np.where(c, 0.0, x))  # (K,)
            m_c = (s_c @ member) / out["n_correct"].to_numpy()  # (G,)
            m_w = (s_w @ member) / out["n_incorrect"].to_numpy()
            b_c = ((counts * s_c) @ member) / bn_c  # (B, G)
            b_w = ((counts * s_w) @ member) / bn_w
            out[f"mean_{u}_correct"], out[f"mean_{u}_incorrect"] = m_c, m_w
            name = "" if u == "len" else "_tokens"
            for stat, point, reps in (
                ("ratio", m_w / m_c, b_w / b_c),
                ("diff", m_w - m_c, b_w - b_c),
            ):
                lo, hi = percentile_interval(np.where(np.isfinite(reps), reps, np.nan), level)
                out[f"{stat}{name}"] = point
                out[f"{stat}{name}_lo"] = np.where(has_ci & np.isfinite(point), lo, math.nan)
                out[f"{stat}{name}_hi"] = np.where(has_ci & np.isfinite(point), hi, math.nan)
    cols = LBC_COLUMNS + (LBC_TOKEN_COLUMNS if "length_tokens" in units else [])
    return out[[*by, *cols]]

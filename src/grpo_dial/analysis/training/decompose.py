"""Response length by correctness over a training run: the exact three-term split; pure, no I/O.

With accuracy a, mean length L_c of correct and L_w of incorrect responses, the mean length is
L = a L_c + (1 - a) L_w. Between a before-window (0) and an after-window (1), with midpoint
weights x_bar = (x0 + x1) / 2, the change splits exactly (an algebraic identity, no remainder):

    L1 - L0 = (a1 - a0) (Lc_bar - Lw_bar)       mix: the accuracy shift between the classes
            + a_bar (Lc1 - Lc0)                 within_correct
            + (1 - a_bar) (Lw1 - Lw0)           within_incorrect

Where the task splits each response's length into necessary work W and redundant re-checking R
(W + R = length, in characters), each within term splits further:
a_bar (Lc1 - Lc0) = a_bar (Wc1 - Wc0) + a_bar (Rc1 - Rc0), and the same for incorrect responses.
The work/redundant terms are NaN when the task gives no split, or when `length` is not the
character column (W and R are characters, so they do not add up to token counts).
On the arithmetic task with a checking tail (tail_checks > 0) R holds the tail after the answer,
so within_incorrect_redundant is the wrong tails' growth: the length bias's own term.

Empty class in one window (say no correct response at step 0): that class's means are taken from
the other window, so its within term is 0 and the mix term carries the whole change (a jumps
from 0 while L_c is held at its only observed value). Empty in both windows: a0 = a1 = 0 (or 1),
the class's means are set to 0 for the terms only, so it drops out (mix 0, within 0) and the total
stays finite; the reported window statistics (Lc0, ...) stay NaN.

Only first-round responses (resample_round == 0) are used by default: DAPO's refill rounds are
biased toward informative prompts, which would make dials incomparable.

Intervals: a cluster bootstrap over PROMPTS. One replicate draws the run's P distinct prompts
(those with a response in either window) P times with replacement, and the same multiset weights
both windows; with counts C (B, P) and per-prompt sums F (P, features), the replicate sums are the
matrix product C @ F. Percentile intervals; replicates where a window ends up empty are NaN and
are left out of the percentiles.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Iterable, Mapping

import numpy as np
import pandas as pd

from grpo_dial.core.bands import UNRATED  # a prompt the band map does not list

REQUIRED = ("step", "prompt_id", "difficulty", "reward", "work", "redundant", "resample_round")
TERMS = (
    "total mix within_correct within_incorrect within_correct_work within_correct_redundant "
    "within_incorrect_work within_incorrect_redundant"
).split()
STATS = "a0 a1 L0 L1 Lc0 Lc1 Lw0 Lw1 Wc0 Wc1 Rc0 Rc1 Ww0 Ww1 Rw0 Rw1 n0 n1 n_prompts".split()
INTERVAL_COLUMNS = ("quantity", "kind", "value", "share", "lo", "hi", "share_lo", "share_hi")
CURVE_COLUMNS = (
    "step band accuracy mean_len mean_len_correct mean_len_incorrect mean_work_correct "
    "mean_redundant_correct mean_work_incorrect mean_redundant_incorrect n"
).split()
# per-prompt, per-window sums; index order is relied on by _terms
_FEATURES = ("n_c", "n_w", "S_c", "S_w", "W_c", "R_c", "W_w", "R_w")


# --------------------------------------------------------------------------- windows


def windows(
    steps: Iterable[int],
    fraction: float = 0.1,
    first: tuple[int, int] | None = None,
    last: tuple[int, int] | None = None,
) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(first_steps, last_steps): the first and last ceil(fraction * S) of the S distinct steps
    (at least one each); `first` / `last` = (lo, hi) instead picks the steps in [lo, hi]."""
    uniq = sorted({int(s) for s in steps})
    if not uniq:
        raise ValueError("windows: no steps given")
    if not 0 < fraction <= 1:
        raise ValueError(f"windows: fraction must be in (0, 1], got {fraction}")
    n = max(1, math.ceil(fraction * len(uniq) - 1e-9))  # 1e-9: 0.1 * 30 is 3.0000000000000004

    def pick(span: tuple[int, int] | None, default: list[int], name: str) -> tuple[int, ...]:
        if span is None:
            return tuple(default)
        lo, hi = span
        chosen = tuple(s for s in uniq if lo <= s <= hi)
        if not chosen:
            raise ValueError(f"windows: {name} range [{lo}, {hi}] holds none of the run's steps")
        return chosen

    return pick(first, uniq[:n], "first"), pick(last, uniq[-n:], "last")


# --------------------------------------------------------------------------- input checks


def _select(responses: pd.DataFrame, length: str, resample_round: int | None) -> pd.DataFrame:
    missing = [c for c in (*REQUIRED, length) if c not in responses.columns]
    if missing:
        raise ValueError(f"responses table lacks column(s) {missing}")
    if resample_round is None:
        df = responses
    else:
        df = responses[responses["resample_round"] == resample_round]
    bad = ~df["reward"].isin([0, 1])
    if bad.any():
        raise ValueError(
            f"reward must be 1 (correct) or 0 (wrong); found {sorted(df['reward'][bad].unique())}"
        )
    return df


def _row_features(df: pd.DataFrame, length: str) -> np.ndarray:
    """(N, 8) per-response contributions to _FEATURES; a NaN work/redundant poisons only its
    own class's column (np.where keeps the other class at 0, not NaN * 0)."""
    c = df["reward"].to_numpy(dtype=float) == 1  # (N,)
    ln = df[length].to_numpy(dtype=float)  # (N,)
    if length == "length":
        w, r = df["work"].to_numpy(dtype=float), df["redundant"].to_numpy(dtype=float)
    else:
        w = r = np.full(len(df), np.nan)  # W, R are characters: no split of token counts
    cols = [
        c,
        ~c,
        np.where(c, ln, 0.0),
        np.where(c, 0.0, ln),
        np.where(c, w, 0.0),
        np.where(c, r, 0.0),
        np.where(c, 0.0, w),
        np.where(c, 0.0, r),
    ]
    return np.stack(cols, axis=1).astype(float)  # (N, 8)


def _prompt_sums(
    responses: pd.DataFrame,
    before_steps: Iterable[int],
    after_steps: Iterable[int],
    length: str,
    resample_round: int | None,
) -> tuple[np.ndarray, np.ndarray]:
    """(prompt ids (P,) sorted, sums (P, 2 * 8)): per prompt, _FEATURES of window 0 then 1."""
    df = _select(responses, length, resample_round)
    masks = []
    for name, steps in (("before", before_steps), ("after", after_steps)):
        steps = sorted({int(s) for s in steps})
        m = df["step"].isin(steps).to_numpy()
        if not m.any():
            raise ValueError(f"{name} window (steps {steps[:5]}...) has no responses")
        masks.append(m)
    either = masks[0] | masks[1]
    codes, ids = pd.factorize(df["prompt_id"][either], sort=True)
    feats = _row_features(df[either], length)  # (N, 8)
    blocks = []
    for m in masks:
        sel = m[either]
        blocks.append(
            np.stack(
                [
                    np.bincount(codes[sel], weights=feats[sel, j], minlength=len(ids))
                    for j in range(len(_FEATURES))
                ],
                axis=1,
            )  # (P, 8)
        )
    return np.asarray(ids), np.concatenate(blocks, axis=1)  # (P,), (P, 16)


# --------------------------------------------------------------------------- the split


def _fill(m0: np.ndarray, m1: np.ndarray, e0: np.ndarray, e1: np.ndarray) -> tuple:
    """Class means for the terms: an empty window borrows the other's mean; both empty -> 0."""
    both = e0 & e1
    f0 = np.where(both, 0.0, np.where(e0, m1, m0))
    f1 = np.where(both, 0.0, np.where(e1, m0, m1))
    return f0, f1


def _terms(sums: np.ndarray) -> dict[str, np.ndarray]:
    """Every TERMS and STATS entry (B,) from window sums (B, 16); NaN where a window is empty."""
    s = sums.reshape(len(sums), 2, len(_FEATURES))  # (B, 2, 8)
    nc, nw = s[..., 0], s[..., 1]  # (B, 2)
    n = nc + nw  # (B, 2)
    with np.errstate(invalid="ignore", divide="ignore"):
        a = np.where(n > 0, nc / n, np.nan)  # (B, 2)
        L = np.where(n > 0, (s[..., 2] + s[..., 3]) / n, np.nan)  # (B, 2)
        ec, ew = (nc == 0)[..., None], (nw == 0)[..., None]  # (B, 2, 1)
        mean_c = np.where(ec, np.nan, s[..., [2, 4, 5]] / nc[..., None])  # (B, 2, 3): L, W, R
        mean_w = np.where(ew, np.nan, s[..., [3, 6, 7]] / nw[..., None])  # (B, 2, 3)
    c0, c1 = _fill(mean_c[:, 0], mean_c[:, 1], ec[:, 0], ec[:, 1])  # (B, 3) each: L, W, R
    w0, w1 = _fill(mean_w[:, 0], mean_w[:, 1], ew[:, 0], ew[:, 1])
    a_bar = (a[:, 0] + a[:, 1]) / 2  # (B,)
    within_c = a_bar[:, None] * (c1 - c0)  # (B, 3)
    within_w = (1 - a_bar)[:, None] * (w1 - w0)  # (B, 3)
    out = {
        "total": L[:, 1] - L[:, 0],
        "mix": (a[:, 1] - a[:, 0]) * ((c0[:, 0] + c1[:, 0]) / 2 - (w0[:, 0] + w1[:, 0]) / 2),
        "within_correct": within_c[:, 0],
        "within_incorrect": within_w[:, 0],
        "within_correct_work": within_c[:, 1],
        "within_correct_redundant": within_c[:, 2],
        "within_incorrect_work": within_w[:, 1],
        "within_incorrect_redundant": within_w[:, 2],
        "a0": a[:, 0],
        "a1": a[:, 1],
        "L0": L[:, 0],
        "L1": L[:, 1],
        "n0": n[:, 0],
        "n1": n[:, 1],
    }
    for t in (0, 1):
        for j, q in enumerate("LWR"):
            out[f"{q}c{t}"] = mean_c[:, t, j]
            out[f"{q}w{t}"] = mean_w[:, t, j]
    return out


def decompose(
    responses: pd.DataFrame,
    before_steps: Iterable[int],
    after_steps: Iterable[int],
    length: str = "length",
    resample_round: int | None = 0,
) -> pd.Series:
    """The three-term split of L1 - L0 (module docstring) as a Series indexed by TERMS then STATS
    (a, L, L_c, L_w, W/R class means per window, responses per window n0/n1, n_prompts).
    `length`: "length" (characters) or "tokens"; `resample_round`: None keeps every round."""
    ids, sums = _prompt_sums(responses, before_steps, after_steps, length, resample_round)
    t = _terms(sums.sum(axis=0, keepdims=True))  # (1, ...)
    values = {q: float(t[q][0]) for q in TERMS + STATS if q != "n_prompts"}
    values["n_prompts"] = float(len(ids))
    return pd.Series({q: values[q] for q in TERMS + STATS}, name="value")


def bootstrap_terms(
    responses: pd.DataFrame,
    before_steps: Iterable[int],
    after_steps: Iterable[int],
    counts: np.ndarray,
    length: str = "length",
    resample_round: int | None = 0,
) -> pd.DataFrame:
    """One row per bootstrap replicate, columns TERMS + STATS (n_prompts excluded): the split of
    the run reweighted by `counts` (B, P), column p = how often the p-th prompt (sorted prompt
    ids with a response in either window) is drawn."""
    ids, sums = _prompt_sums(responses, before_steps, after_steps, length, resample_round)
    counts = np.asarray(counts, dtype=float)
    if counts.ndim != 2 or counts.shape[1] != len(ids):
        raise ValueError(f"counts must have shape (B, {len(ids)}), got {counts.shape}")
    t = _terms(counts @ sums)  # (B, 16) -> (B,) each
    return pd.DataFrame({q: t[q] for q in TERMS + STATS if q != "n_prompts"})


def percentile_interval(x: np.ndarray, level: float) -> tuple[np.ndarray, np.ndarray]:
    """Columnwise percentile interval over the non-NaN replicates of x (B, Q); an all-NaN
    column gives NaN."""
    q = 100 * np.array([(1 - level) / 2, (1 + level) / 2])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN column -> NaN, on purpose
        lo, hi = np.nanpercentile(x, q, axis=0)  # (Q,) each
    return lo, hi


def decompose_with_intervals(
    responses: pd.DataFrame,
    before_steps: Iterable[int],
    after_steps: Iterable[int],
    n_boot: int = 1000,
    seed: int = 0,
    level: float = 0.9,
    length: str = "length",
    resample_round: int | None = 0,
) -> pd.DataFrame:
    """Tidy table, columns INTERVAL_COLUMNS: one row per quantity, kind "term" (TERMS, in order)
    then kind "stat" (STATS). share = value / total (NaN when total is 0, and for stats);
    lo/hi and share_lo/share_hi = percentile interval at `level` from the prompt bootstrap;
    n0, n1, n_prompts carry no interval."""
    if n_boot < 1:
        raise ValueError(f"n_boot must be >= 1, got {n_boot}")
    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1), got {level}")
    ids, sums = _prompt_sums(responses, before_steps, after_steps, length, resample_round)
    p = len(ids)
    rng = np.random.default_rng(seed)
    counts = rng.multinomial(p, np.full(p, 1.0 / p), size=n_boot).astype(float)  # (B, P)
    point = _terms(sums.sum(axis=0, keepdims=True))
    boot = _terms(counts @ sums)  # (B,) each
    names = [q for q in TERMS + STATS if q != "n_prompts"]
    reps = np.stack([boot[q] for q in names], axis=1)  # (B, Q)
    lo, hi = percentile_interval(reps, level)
    with np.errstate(invalid="ignore", divide="ignore"):
        share_reps = np.where(
            boot["total"][:, None] != 0, reps[:, : len(TERMS)] / boot["total"][:, None], np.nan
        )  # (B, terms)
    s_lo, s_hi = percentile_interval(share_reps, level)
    total = float(point["total"][0])
    rows = []
    for j, q in enumerate(names):
        value = float(point[q][0])
        is_term = q in TERMS
        no_ci = q in ("n0", "n1")
        rows.append(
            (
                q,
                "term" if is_term else "stat",
                value,
                value / total if is_term and total != 0 else math.nan,
                math.nan if no_ci else lo[j],
                math.nan if no_ci else hi[j],
                s_lo[j] if is_term else math.nan,
                s_hi[j] if is_term else math.nan,
            )
        )
    rows.append(("n_prompts", "stat", float(p), *[math.nan] * 5))
    return pd.DataFrame(rows, columns=list(INTERVAL_COLUMNS))


# --------------------------------------------------------------------------- curves


def length_curves(
    responses: pd.DataFrame,
    band_of: Mapping[str, str] | None = None,
    length: str = "length",
    resample_round: int | None = 0,
) -> pd.DataFrame:
    """Per (step, band) curves, columns CURVE_COLUMNS: accuracy = mean reward, mean lengths
    overall / of correct / of incorrect responses, mean work and redundant characters by class,
    n responses. Band "all" plus each band: band_of[prompt_id] (UNRATED when absent) if given,
    else the `difficulty` column. Class means are NaN in a step with no response of the class."""
    df = _select(responses, length, resample_round)
    c = df["reward"].to_numpy(dtype=float) == 1  # (N,)
    ln = df[length].to_numpy(dtype=float)
    w, r = df["work"].to_numpy(dtype=float), df["redundant"].to_numpy(dtype=float)
    if band_of is None:
        band = df["difficulty"].astype(str).to_numpy()
    else:
        band = df["prompt_id"].map(lambda pid: band_of.get(pid, UNRATED)).astype(str).to_numpy()
    nan = np.nan
    cols = pd.DataFrame(
        {
            "step": df["step"].to_numpy(),
            "accuracy": c.astype(float),
            "mean_len": ln,
            "mean_len_correct": np.where(c, ln, nan),
            "mean_len_incorrect": np.where(c, nan, ln),
            "mean_work_correct": np.where(c, w, nan),
            "mean_redundant_correct": np.where(c, r, nan),
            "mean_work_incorrect": np.where(c, nan, w),
            "mean_redundant_incorrect": np.where(c, nan, r),
        }
    )
    both = pd.concat([cols.assign(band="all"), cols.assign(band=band)], ignore_index=True)
    grouped = both.groupby(["step", "band"], sort=False)
    out = grouped.mean().join(grouped.size().rename("n")).reset_index()
    order = {b: i for i, b in enumerate(["all", *sorted(set(band) - {"all"})])}
    out = out.sort_values(["step", "band"], key=_band_key(order)).reset_index(drop=True)
    return out[CURVE_COLUMNS]


def _band_key(order: Mapping[str, int]):
    def key(s: pd.Series) -> pd.Series:
        return s.map(order) if s.name == "band" else s

    return key

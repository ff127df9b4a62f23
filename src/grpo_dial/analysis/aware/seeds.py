"""The aware-tail runs over seeds: the drift, truncation and decomposition tables and the rank
tests behind them (per run: analysis/aware/runs.py).

Over seeds (`drift_table`): the mean with its Student-t interval at 90 % (seed_stats.t_interval,
none below 3 seeds); beside it, tests that do not assume a normal mean, since take-off is
all-or-nothing per seed: the sign test (binomial, the seeds whose value is not 0) and the
Wilcoxon signed-rank test over seeds, Fisher's exact test of the arm's take-off count against the
null arm's (the zero-push arm, Dr. GRPO), and the Mann-Whitney test of the arm's seeds against
the reference arm's (a ratio of two bimodal means tests little on its own). All p two-sided.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd
from scipy import stats

from grpo_dial.analysis.aware.runs import DECOMPOSITION_TERMS, log_tail
from grpo_dial.analysis.seed_stats import t_interval


def rank_tests(x) -> dict[str, float]:
    """Tests over seeds of x's finite values against 0: n_pos, n_neg, the sign test's p
    (binomial on the nonzero values) and the Wilcoxon signed-rank test's p (NaN without a
    nonzero value); both two-sided."""
    x = np.asarray(x, dtype=float)
    x = x[np.isfinite(x)]
    pos, neg = int((x > 0).sum()), int((x < 0).sum())
    out = {"n_pos": pos, "n_neg": neg, "sign_p": float("nan"), "wilcoxon_p": float("nan")}
    if pos + neg:
        out["sign_p"] = float(stats.binomtest(pos, pos + neg, 0.5).pvalue)
        out["wilcoxon_p"] = float(stats.wilcoxon(x[x != 0]).pvalue)
    return out


def bh_adjust(p) -> np.ndarray:
    """Benjamini-Hochberg adjusted p-values (scipy's false_discovery_control) of p's finite
    values, a family of tests read together (one arm's cells over awareness); NaN stays NaN."""
    p = np.asarray(p, dtype=float)
    out = np.full(p.shape, np.nan)
    ok = np.isfinite(p)
    if ok.any():
        out[ok] = stats.false_discovery_control(p[ok], method="bh")
    return out


def fisher_p(k_a: int, n_a: int, k_b: int, n_b: int) -> float:
    """Fisher's exact test (two-sided) of k_a of n_a against k_b of n_b; NaN when a side is
    empty."""
    if n_a < 1 or n_b < 1:
        return float("nan")
    return float(stats.fisher_exact([[k_a, n_a - k_a], [k_b, n_b - k_b]]).pvalue)


def mann_whitney_p(x, y) -> float:
    """Mann-Whitney U test (two-sided) of x's finite values against y's; NaN below one each."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    x, y = x[np.isfinite(x)], y[np.isfinite(y)]
    if not len(x) or not len(y) or np.ptp(np.r_[x, y]) == 0:
        return float("nan")
    return float(stats.mannwhitneyu(x, y, alternative="two-sided").pvalue)


def _boot_ratio(x: np.ndarray, y: np.ndarray, n_boot: int, seed: int, level: float) -> tuple:
    """mean(x) / mean(y) and a percentile interval resampling the seeds of both arms."""
    x, y = x[np.isfinite(x)], y[np.isfinite(y)]
    if len(x) < 2 or len(y) < 2 or y.mean() == 0:
        return float("nan"), float("nan"), float("nan")
    rng = np.random.default_rng(seed)
    bx = x[rng.integers(0, len(x), (n_boot, len(x)))].mean(1)
    by = y[rng.integers(0, len(y), (n_boot, len(y)))].mean(1)
    with np.errstate(divide="ignore", invalid="ignore"):
        r = bx / by
    lo, hi = np.nanquantile(r, [(1 - level) / 2, (1 + level) / 2])
    return float(x.mean() / y.mean()), float(lo), float(hi)


DRIFT_COLUMNS = (
    "dial n_seeds quantity base mean lo hi min max n_pos n_neg sign_p wilcoxon_p n_up n_down "
    "takeoff_p mwu_p ratio ratio_lo ratio_hi ratio_sgd ratio_snr pred_sgd snr grad_norm "
    "clip_share truncation_last"
).split()
QUANTITIES = (
    "contrast", "d_wrong", "d_correct", "d_common", "contrast_tokens", "d_wrong_tokens",
    "d_correct_tokens", "d_tail_wrong_resp", "d_tail_correct_resp",
)  # fmt: skip
_BASE = {  # quantity -> the run column of its base value, and its transform
    "d_wrong": ("tail_estimate_base", log_tail),
    "d_correct": ("tail_compute_base", log_tail),
    "d_wrong_tokens": ("tail_estimate_base", None),
    "d_correct_tokens": ("tail_compute_base", None),
    "d_tail_wrong_resp": ("tail_wrong_base", None),
    "d_tail_correct_resp": ("tail_correct_base", None),
}


def drift_table(
    runs: pd.DataFrame,
    reference: str = "grpo",
    null: str | None = "dr_grpo",
    level: float = 0.9,
    n_boot: int = 2000,
    snr: Mapping[str, float] | None = None,
) -> pd.DataFrame:
    """Per dial and quantity (DRIFT_COLUMNS): the base policy's value (the level the drift
    starts from: L or tokens), the seed mean with its t interval, the rank tests (`rank_tests`),
    the take-off counts (runs' `takeoff`) with Fisher's p against the `null` dial's,
    Mann-Whitney's p and the measured ratio (bootstrap interval) against the `reference` dial,
    and the predictions: the closed form's SGD ratio, the SNR ratio (`snr`: dial -> the contrast
    push's signal-to-noise ratio; NaN without), the SGD drift (pred_sgd, theta units); the
    median gradient norm, the share of clipped steps and the largest last-window truncated share
    over seeds."""
    if reference not in set(runs["dial"]):
        raise ValueError(
            f"reference dial {reference!r} has no runs; dials: {sorted(set(runs['dial']))}"
        )
    ref = runs[runs["dial"] == reference]
    nul = runs[runs["dial"] == null] if null is not None else runs.iloc[:0]
    snr = dict(snr or {})
    rows = []
    for dial, d in runs.groupby("dial", sort=False):
        up, down = int((d["takeoff"] > 0).sum()), int((d["takeoff"] < 0).sum())
        takeoff_p = (
            fisher_p(up, len(d), int((nul["takeoff"] > 0).sum()), len(nul))
            if len(nul) and dial != null
            else float("nan")
        )
        for q in QUANTITIES:
            x = d[q].to_numpy(dtype=float)
            s = t_interval(x, level)
            r, rlo, rhi = _boot_ratio(x, ref[q].to_numpy(dtype=float), n_boot, 0, level)
            path = "u_correct" if q in ("d_correct", "d_correct_tokens") else "u_wrong"
            u_arm, u_ref = float(d[path].mean()), float(ref[path].mean())
            column, transform = _BASE.get(q, (None, None))
            base = float(d[column].mean()) if column else float("nan")
            rows.append(
                {
                    "dial": dial,
                    "n_seeds": len(d),
                    "quantity": q,
                    "base": transform(base) if transform else base,
                    "mean": s.mean,
                    "lo": s.lo,
                    "hi": s.hi,
                    "min": s.low,
                    "max": s.high,
                    **rank_tests(x),
                    "n_up": up,
                    "n_down": down,
                    "takeoff_p": takeoff_p,
                    "mwu_p": mann_whitney_p(x, ref[q]) if dial != reference else float("nan"),
                    "ratio": r,
                    "ratio_lo": rlo,
                    "ratio_hi": rhi,
                    "ratio_sgd": u_arm / u_ref if u_ref else float("nan"),
                    "ratio_snr": snr.get(dial, np.nan) / snr[reference]
                    if snr.get(reference)
                    else float("nan"),
                    "pred_sgd": float(
                        d["pred_correct" if path == "u_correct" else "pred_wrong"].mean()
                    ),
                    "snr": snr.get(dial, float("nan")),
                    "grad_norm": float(d["grad_norm"].median()),
                    "clip_share": float(d["clip_share"].mean()),
                    "truncation_last": float(d["truncation_last"].max()),
                }  # fmt: skip
            )
    return pd.DataFrame(rows, columns=DRIFT_COLUMNS)


TRUNCATION_COLUMNS = ("dial", "window", "n_seeds", "mean", "max")


def truncation_table(runs: pd.DataFrame, by: tuple[str, ...] = ("dial",)) -> pd.DataFrame:
    """The truncated share of responses per group of runs (`by`, e.g. dial) and window (base,
    first, last): mean and largest over seeds."""
    rows = []
    for key, d in runs.groupby(list(by), sort=False):
        key = key if isinstance(key, tuple) else (key,)
        for w in ("base", "first", "last"):
            x = d[f"truncation_{w}"].to_numpy(dtype=float)
            rows.append(
                {**dict(zip(by, key, strict=True)), "window": w, "n_seeds": len(d),
                 "mean": float(np.mean(x)), "max": float(np.max(x))}
            )  # fmt: skip
    return pd.DataFrame(rows, columns=[*by, *TRUNCATION_COLUMNS[1:]])


def decomposition_table(per_run: pd.DataFrame, level: float = 0.9) -> pd.DataFrame:
    """Per dial and term: seed mean with its Student-t interval (columns dial, term, mean, lo,
    hi, n_seeds)."""
    rows = []
    for dial, d in per_run.groupby("dial", sort=False):
        for q in DECOMPOSITION_TERMS:
            m, lo, hi = t_interval(d[q].to_numpy(), level)[:3]
            rows.append({"dial": dial, "term": q, "mean": m, "lo": lo, "hi": hi, "n_seeds": len(d)})
    return pd.DataFrame(rows, columns=["dial", "term", "mean", "lo", "hi", "n_seeds"])

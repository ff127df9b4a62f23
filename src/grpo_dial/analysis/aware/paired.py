"""The aware sweep's arms compared seed by seed, their ratios with bootstrap intervals, and the
power of each comparison.

Every arm of a level, and the tail-frozen control, is trained with the same seeds, and a seed fixes
the batches' prompts and the sampler's stream: the arms share random numbers, so the difference of
two arms is read per seed (d_s = x_s - y_s over the seeds both have), not as two independent
samples. `paired_table`: per optimizer, level and quantity, for each arm against the control
(arm - control) and the reference arm against each other arm (reference - arm): the mean of d with
its 90 % t interval (the paired t test's), the sign and Wilcoxon signed-rank tests on d, Welch's
interval of the same difference beside it (as if the seeds were independent), the smallest shift
the paired test detects at 80 % power (seed_stats.detectable_shift, se = sd(d) / sqrt(n)) and
the predicted difference (`prediction`: the SGD closed form, Adam's first-order step or one Adam
coordinate's drift).

`ratio_table`: per optimizer, level, quantity and arm, mean(arm) / mean(reference) and, net of the
control, mean(arm - control) / mean(reference - control), each with a percentile bootstrap
interval resampling the shared seeds (one draw of seeds for every arm in it, BOOTSTRAP draws):
the interval is unbounded (-inf, +inf) where the denominator's bootstrap draws take the other
sign in more than (1 - level) / 2 of them, since the ratio then passes through infinity inside
the interval; beside it the predicted ratio.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from grpo_dial.analysis.aware.grid import FROZEN
from grpo_dial.analysis.aware.seeds import rank_tests
from grpo_dial.analysis.seed_stats import (
    detectable_shift,
    difference_interval,
    sample_se,
    t_interval,
)

PAIRED_QUANTITIES = ("contrast_tokens", "d_wrong_tokens", "d_correct_tokens")
BOOTSTRAP = 4000  # bootstrap draws of the seeds per ratio
POWER = 0.8  # the power at which the detectable shift is stated

PAIRED_COLUMNS = (
    "optimizer level a quantity first second n mean lo hi n_pos n_neg sign_p wilcoxon_p "
    "welch_lo welch_hi detectable predicted"
).split()
RATIO_COLUMNS = (
    "optimizer level a quantity dial reference n ratio lo hi net_ratio net_lo net_hi predicted"
).split()


def prediction(runs: pd.DataFrame, quantity: str) -> pd.Series:
    """Each run's prediction of `quantity`: the SGD closed form (pred_*) where it is given, else
    Adam's first-order step (adam1_*, dose.adam_first_order), else one Adam coordinate's drift
    (adam_*); NaN where none is."""
    out = pd.Series(np.nan, index=runs.index, dtype=float)
    for column in (f"pred_{quantity}", f"adam1_{quantity}", f"adam_{quantity}"):
        if column in runs:
            out = out.where(out.notna(), runs[column].astype(float))
    return out


def _by_seed(cell: pd.DataFrame, quantity: str) -> pd.Series:
    return cell.set_index("seed")[quantity].astype(float)


def _paired_row(x: pd.Series, y: pd.Series, px: float, py: float, level: float) -> dict:
    """The paired comparison of x - y over the seeds both have (module docstring)."""
    seeds = x.index.intersection(y.index)
    d = (x.loc[seeds] - y.loc[seeds]).to_numpy()
    s = t_interval(d, level)
    _, welch_lo, welch_hi = difference_interval(x.to_numpy(), y.to_numpy(), level)
    se, df = sample_se(d)
    return {"n": s.n, "mean": s.mean, "lo": s.lo, "hi": s.hi, **rank_tests(d),
            "welch_lo": welch_lo, "welch_hi": welch_hi,
            "detectable": detectable_shift(se, df, level, POWER), "predicted": px - py}  # fmt: skip


def paired_table(runs: pd.DataFrame, reference: str, control: str = FROZEN,
                 level: float = 0.9) -> pd.DataFrame:  # fmt: skip
    """PAIRED_COLUMNS (module docstring): every arm minus the control, and the reference arm minus
    every other arm, per optimizer, level and quantity; `first` - `second` is the difference. The
    control's cell stands for every level and optimizer (its zero step depends on neither)."""
    ctrl = runs[runs["dial"] == control]
    rows = []
    for (opt, lev), g in runs[runs["dial"] != control].groupby(["optimizer", "level"],
                                                                sort=False):  # fmt: skip
        arms = list(dict.fromkeys(g["dial"]))
        a = float(g["a"].iloc[0])
        for q in PAIRED_QUANTITIES:
            pred = prediction(g, q).groupby(g["dial"]).mean()
            pairs = [(d, control) for d in arms] if len(ctrl) else []
            if reference in arms:
                pairs += [(reference, d) for d in arms if d != reference]
            for first, second in pairs:
                x = _by_seed(g[g["dial"] == first], q)
                y = _by_seed(ctrl if second == control else g[g["dial"] == second], q)
                py = 0.0 if second == control else float(pred[second])
                rows.append({"optimizer": opt, "level": lev, "a": a, "quantity": q,
                             "first": first, "second": second,
                             **_paired_row(x, y, float(pred[first]), py, level)})  # fmt: skip
    return pd.DataFrame(rows, columns=PAIRED_COLUMNS)


def _boot_interval(num: np.ndarray, den: np.ndarray, level: float) -> tuple[float, float]:
    """The percentile interval of num / den over bootstrap draws, (-inf, +inf) where den takes
    the other sign than its mean in more than (1 - level) / 2 of the draws."""
    tail = (1 - level) / 2
    sign = np.sign(den.mean())
    if sign == 0 or np.mean(np.sign(den) != sign) > tail:
        return float("-inf"), float("inf")
    lo, hi = np.quantile(num / den, [tail, 1 - tail])
    return float(lo), float(hi)


def seed_ratio(x: np.ndarray, ref: np.ndarray, ctrl: np.ndarray | None = None,
               level: float = 0.9, draws: int = BOOTSTRAP, seed: int = 0) -> dict:  # fmt: skip
    """mean(x) / mean(ref) and (ctrl given) mean(x - ctrl) / mean(ref - ctrl) over seeds aligned
    row by row, with percentile bootstrap intervals drawing the seeds once for all arms (module
    docstring); NaN below 3 seeds or for a zero denominator."""
    n = len(x)
    nan = float("nan")
    out = {"n": n, "ratio": nan, "lo": nan, "hi": nan, "net_ratio": nan, "net_lo": nan,
           "net_hi": nan}  # fmt: skip
    if n < 3:
        return out
    idx = np.random.default_rng(seed).integers(0, n, (draws, n))
    pairs = [("", x, ref)]
    if ctrl is not None:
        pairs.append(("net_", x - ctrl, ref - ctrl))
    for prefix, num, den in pairs:
        if den.mean() == 0:
            continue
        key = f"{prefix}ratio" if prefix else "ratio"
        lo, hi = _boot_interval(num[idx].mean(1), den[idx].mean(1), level)
        out |= {key: float(num.mean() / den.mean()), f"{prefix}lo": lo, f"{prefix}hi": hi}
    return out


def ratio_table(runs: pd.DataFrame, reference: str, control: str = FROZEN,
                level: float = 0.9) -> pd.DataFrame:  # fmt: skip
    """RATIO_COLUMNS (module docstring) for every arm but the reference and the control, over
    the seeds the arm, the reference and (when trained) the control share."""
    ctrl = runs[runs["dial"] == control]
    rows = []
    for (opt, lev), g in runs[runs["dial"] != control].groupby(["optimizer", "level"],
                                                                sort=False):  # fmt: skip
        if reference not in set(g["dial"]):
            continue
        for q in PAIRED_QUANTITIES:
            pred = prediction(g, q).groupby(g["dial"]).mean()
            ref = _by_seed(g[g["dial"] == reference], q)
            c = _by_seed(ctrl, q) if len(ctrl) else None
            ref_pred = float(pred[reference])
            for d in dict.fromkeys(g["dial"]):
                if d == reference:
                    continue
                x = _by_seed(g[g["dial"] == d], q)
                seeds = x.index.intersection(ref.index)
                if c is not None:
                    seeds = seeds.intersection(c.index)
                seeds = seeds.sort_values()
                r = seed_ratio(x.loc[seeds].to_numpy(), ref.loc[seeds].to_numpy(),
                               None if c is None else c.loc[seeds].to_numpy(), level)
                predicted = (float(pred[d]) / ref_pred if np.isfinite(ref_pred) and ref_pred
                             else float("nan"))  # fmt: skip
                rows.append({"optimizer": opt, "level": lev, "a": float(g["a"].iloc[0]),
                             "quantity": q, "dial": d, "reference": reference, **r,
                             "predicted": predicted})  # fmt: skip
    return pd.DataFrame(rows, columns=RATIO_COLUMNS)


__all__ = [
    "BOOTSTRAP", "PAIRED_COLUMNS", "PAIRED_QUANTITIES", "POWER", "RATIO_COLUMNS", "paired_table",
    "prediction", "ratio_table", "seed_ratio",
]  # fmt: skip

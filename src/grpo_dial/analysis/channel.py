"""The checking tail's channel: can the policy tell, from its own context, that its answer is wrong?

Per sampled response (`channel_rows`, texts of data/tasks/arithmetic_tail.py): the verdict, the
tail's characters, its checks, and whether a check disagrees with the stated answer. Per policy
(`channel_summary`), over responses with a valued check:
    sensitivity  = P(disagree | wrong)          false_alarm = P(disagree | correct)
    auc_disagree = (1 + sensitivity - false_alarm) / 2      the AUC of a 0/1 score for wrongness
    continue_gap = P(2nd check | 1st disagrees) - P(2nd check | 1st agrees)
The first two say whether the channel carries the information; continue_gap whether the policy
acts on it. Tail length against correctness, per response set (`tail_awareness`):
    auc_tail = sum_g U_g / sum_g n_w,g n_c,g,   U_g = #{(i wrong, j correct) in group g: t_i > t_j}
               + #{ties} / 2,
the AUC of tail characters for wrongness over pairs of the SAME group (same prompt, same step),
so that harder prompts, whose checks are longer and whose answers are wrong more often, cannot
pass for awareness; 0.5 = a tail blind to correctness. gap = mean over groups holding both
classes of (mean wrong tail - mean correct tail). auc_checks: the same AUC for the number of
checks, which unlike characters does not grow with the digits a wrong answer writes.

Prediction (docs/design-notes.md#the-length-bias): the wrong tails' drift rate is
lr E[sigma^(2-alpha)] |Cov(1/|o|, s)| under the per-sequence normalizer, 0 under the constant
one and small (at most TOKEN_RATIO_MAX of the sequence mean's at G = 8) under a token mean.
Relative to GRPO (alpha 1, sequence) an arm's ratio is E_p[E[sigma^(2-alpha)]] / E_p[E[sigma]]
over the pool's pass rates, 0 for `constant`, and the band [0, TOKEN_RATIO_MAX] for `token`. The
ratio is for lr x gradient steps; AdamW rescales each arm's global gradient size, so under it the
ordering (sequence > token > constant = 0) is the testable part.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd

from grpo_dial.analysis.seed_stats import t_interval
from grpo_dial.core.dial import Dial
from grpo_dial.core.theory import expected_sigma, expected_sigma_power
from grpo_dial.data.tasks.arithmetic_tail import channel, check_values, split_tail

# the token mean's drift bound at G = 8, as a share of the sequence mean's (docs/design-notes.md)
TOKEN_RATIO_MAX = 0.15
ROW_COLUMNS = (
    "group prompt_id difficulty reward truncated length tail_chars n_checks n_valued disagree "
    "checks_right first_disagree"
).split()
SUMMARY_COLUMNS = (
    "n accuracy mean_tail_correct mean_tail_wrong share_with_check checks_right_rate "
    "sensitivity false_alarm auc_disagree continue_after_disagree continue_after_agree "
    "continue_gap auc_tail gap auc_checks"
).split()


def channel_rows(task, problems: list, texts: list[str], finished: list[bool]) -> pd.DataFrame:
    """One row per response (ROW_COLUMNS); `group` numbers the distinct prompts in order.
    first_disagree: the first check's value differs from the stated answer (NA: no valued first
    check)."""
    rows = []
    ids = pd.factorize(pd.Series([p.prompt_id for p in problems]))[0]
    for g, p, text, fin in zip(ids.tolist(), problems, texts, finished, strict=True):
        verdict = task.verify(p, text, fin)
        ch = channel(text, verdict.answer, p.reference)
        first = _first_value(text)
        rows.append(
            (g, p.prompt_id, p.difficulty, int(verdict.correct), not fin, len(text))
            + (ch.tail_chars, ch.n_checks, ch.n_valued, ch.disagree, ch.checks_right)
            + (pd.NA if first is None else first != verdict.answer,)
        )
    out = pd.DataFrame(rows, columns=ROW_COLUMNS)
    out["first_disagree"] = out["first_disagree"].astype("boolean")
    return out


def _first_value(text: str) -> str | None:
    values = check_values(split_tail(text)[1])
    return values[0] if values else None


def within_group_auc(group: np.ndarray, wrong: np.ndarray, score: np.ndarray) -> float:
    """AUC of `score` for wrongness over (wrong, correct) pairs of the same group (ties 1/2);
    NaN when no group holds both classes."""
    df = pd.DataFrame({"g": group, "w": wrong.astype(bool), "s": score.astype(float)})
    rank = df.groupby("g")["s"].rank(method="average")  # (N,) 1-based within group
    per = (
        df.assign(r=rank.where(df["w"], 0.0))
        .groupby("g")
        .agg(nw=("w", "sum"), n=("w", "size"), rw=("r", "sum"))
    )
    nc = per["n"] - per["nw"]
    pairs = float((per["nw"] * nc).sum())
    u = (per["rw"] - per["nw"] * (per["nw"] + 1) / 2).where(nc > 0, 0.0)
    return float(u.sum()) / pairs if pairs > 0 else float("nan")


def within_group_gap(group: np.ndarray, wrong: np.ndarray, score: np.ndarray) -> float:
    """Mean over groups holding both classes of (mean score of wrong - mean score of correct)."""
    df = pd.DataFrame({"g": group, "w": wrong.astype(bool), "s": score.astype(float)})
    means = df.groupby(["g", "w"])["s"].mean().unstack()
    if True not in means or False not in means:
        return float("nan")
    d = (means[True] - means[False]).dropna()
    return float(d.mean()) if len(d) else float("nan")


def tail_awareness(responses: pd.DataFrame, tail: str = "redundant") -> pd.DataFrame:
    """Per step of a training run (first-round responses): tail by correctness, auc_tail, gap
    (module docstring), with groups keyed by (step, group)."""
    df = responses[responses["resample_round"] == 0] if "resample_round" in responses else responses
    rows = []
    for step, d in df.groupby("step", sort=True):
        wrong = d["reward"].to_numpy() == 0
        t = d[tail].to_numpy(dtype=float)
        g = d["group"].to_numpy()
        rows.append(
            {
                "step": int(step),
                "accuracy": float(1 - wrong.mean()),
                "mean_tail_correct": float(t[~wrong].mean()) if (~wrong).any() else np.nan,
                "mean_tail_wrong": float(t[wrong].mean()) if wrong.any() else np.nan,
                "auc_tail": within_group_auc(g, wrong, t),
                "gap": within_group_gap(g, wrong, t),
                "n": len(d),
            }
        )
    return pd.DataFrame(rows)


def channel_summary(rows: pd.DataFrame) -> pd.Series:
    """SUMMARY_COLUMNS of one policy's channel_rows (module docstring)."""
    wrong = rows["reward"].to_numpy() == 0
    valued = rows["n_valued"].to_numpy() > 0
    dis = rows["disagree"].to_numpy(dtype=bool)
    tail = rows["tail_chars"].to_numpy(dtype=float)
    sens = _mean(dis[wrong & valued])
    fa = _mean(dis[~wrong & valued])
    first = rows["first_disagree"]
    more = rows["n_checks"].to_numpy() >= 2
    known = first.notna().to_numpy()
    fd = first.fillna(False).to_numpy(dtype=bool)
    after_dis, after_agree = _mean(more[known & fd]), _mean(more[known & ~fd])
    g = rows["group"].to_numpy()
    return pd.Series(
        {
            "n": float(len(rows)),
            "accuracy": _mean(~wrong),
            "mean_tail_correct": _mean(tail[~wrong]),
            "mean_tail_wrong": _mean(tail[wrong]),
            "share_with_check": _mean(valued),
            "checks_right_rate": float(rows["checks_right"].sum() / max(rows["n_valued"].sum(), 1)),
            "sensitivity": sens,
            "false_alarm": fa,
            "auc_disagree": (1 + sens - fa) / 2,
            "continue_after_disagree": after_dis,
            "continue_after_agree": after_agree,
            "continue_gap": after_dis - after_agree,
            "auc_tail": within_group_auc(g, wrong, tail),
            "gap": within_group_gap(g, wrong, tail),
            "auc_checks": within_group_auc(g, wrong, rows["n_checks"].to_numpy(dtype=float)),
        }
    )[SUMMARY_COLUMNS]


def _mean(x: np.ndarray) -> float:
    return float(np.mean(x)) if len(x) else float("nan")


# --------------------------------------------------------------------------- prediction


def predicted_ratio(p: np.ndarray, G: int, std_power: float, length_norm: str) -> tuple:
    """(lo, hi) of an arm's wrong-tail drift rate relative to GRPO's (module docstring); NaN for
    lambda-GRPO's weights, which have no closed form (their drift is measured only)."""
    if length_norm == "constant":
        return 0.0, 0.0
    if length_norm == "lambda":
        return float("nan"), float("nan")
    grpo = float(np.mean(expected_sigma(p, G)))
    arm = float(np.mean(expected_sigma_power(p, G, 2.0 - std_power)))
    ratio = arm / grpo if grpo > 0 else float("nan")
    if length_norm == "token":
        return 0.0, TOKEN_RATIO_MAX * ratio
    if length_norm != "sequence":
        raise ValueError(
            f"length_norm={length_norm!r} is not valid; choose sequence, token, constant"
        )
    return ratio, ratio


def prediction_table(p: np.ndarray, G: int, dials: Mapping[str, Dial]) -> pd.DataFrame:
    """One row per arm: its alpha, normalizer and predicted drift ratio to GRPO's (lo, hi)."""
    rows = []
    for name, dial in dials.items():
        lo, hi = predicted_ratio(p, G, dial.std_power, dial.length_norm)
        rows.append(
            {
                "dial": name,
                "std_power": dial.std_power,
                "length_norm": dial.length_norm,
                "ratio_lo": lo,
                "ratio_hi": hi,
            }
        )
    return pd.DataFrame(rows)


# --------------------------------------------------------------------------- drift per run and dial

DRIFT_QUANTITIES = (
    "gap_drift wrong_tail_drift correct_tail_drift auc_tail_drift total "
    "within_incorrect_redundant within_correct_redundant within_incorrect_work"
).split()
_TERMS = tuple(DRIFT_QUANTITIES[4:])  # read from the length decomposition's terms


def run_drift(awareness: pd.DataFrame, terms: pd.DataFrame, fraction: float = 0.1) -> dict:
    """One run's drift: gap and auc_tail, mean of the last ceil(fraction S) steps minus the
    first's (awareness: tail_awareness rows); the wrong and correct tail change Rw1 - Rw0 and
    Rc1 - Rc0 and the decomposition's total and tail / work terms (`terms`:
    decompose_with_intervals; on the tail task redundant = the tail)."""
    steps = np.sort(awareness["step"].unique())
    n = max(1, int(np.ceil(fraction * len(steps) - 1e-9)))
    first = awareness[awareness["step"].isin(steps[:n])]
    last = awareness[awareness["step"].isin(steps[-n:])]
    stat = terms.set_index("quantity")["value"]
    return {
        "gap0": float(first["gap"].mean()),
        "gap1": float(last["gap"].mean()),
        "gap_drift": float(last["gap"].mean() - first["gap"].mean()),
        "auc_tail0": float(first["auc_tail"].mean()),
        "auc_tail1": float(last["auc_tail"].mean()),
        "auc_tail_drift": float(last["auc_tail"].mean() - first["auc_tail"].mean()),
        "wrong_tail_drift": float(stat["Rw1"] - stat["Rw0"]),
        "correct_tail_drift": float(stat["Rc1"] - stat["Rc0"]),
        **{q: float(stat[q]) for q in _TERMS},
    }


def drift_by_dial(
    runs: pd.DataFrame, ratios: pd.DataFrame, reference: str = "grpo", level: float = 0.9
) -> pd.DataFrame:
    """Per dial and DRIFT_QUANTITIES: mean and Student-t interval over seeds (seed_stats.t_interval:
    NaN below 3 seeds; runs: one row per
    dial and seed), the predicted ratio band to `reference` (ratios: dial, ratio_lo, ratio_hi),
    the prediction ratio x the reference's measured mean, and the measured ratio."""
    if reference not in set(runs["dial"]):
        raise ValueError(
            f"reference dial {reference!r} has no runs; dials: {sorted(set(runs['dial']))}"
        )
    band = ratios.set_index("dial")
    rows = []
    for q in DRIFT_QUANTITIES:
        ref = t_interval(runs.loc[runs["dial"] == reference, q], level).mean
        for dial, d in runs.groupby("dial", sort=False):
            m, lo, hi = t_interval(d[q], level)[:3]
            r_lo, r_hi = band.loc[dial, ["ratio_lo", "ratio_hi"]].astype(float)
            rows.append(
                {
                    "dial": dial,
                    "quantity": q,
                    "mean": m,
                    "lo": lo,
                    "hi": hi,
                    "n_seeds": int(d[q].notna().sum()),
                    "ratio_lo": r_lo,
                    "ratio_hi": r_hi,
                    "predicted_lo": r_lo * ref,
                    "predicted_hi": r_hi * ref,
                    "measured_ratio": m / ref if ref != 0 else float("nan"),
                }
            )
    return pd.DataFrame(rows)

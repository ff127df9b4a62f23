"""Which logged number says a response is correct: the reward column(s), their weights, the
threshold, or a correctness column (`correct_from`).

Rules, per trainer (the docs page, diagnose-your-run.md, lists the settings behind them):
- reward: the named `reward_column`, else the only reward-like column (numeric, not boolean, not
  step / advantage / difficulty / a correctness column), else an error listing the candidates.
  A list of columns is their weighted sum sum_i w_i r_i with NaN entries counting 0 and an
  all-NaN row staying NaN, as TRL's `(rewards_per_func * reward_weights).nansum(dim=1)`
  (`reward_weights` = GRPOConfig.reward_weights; unit weights when not given).
- correct_from = "reward" (default): correct iff reward > threshold. When the log holds verl's
  `overlong_reward` (the DAPO reward manager with overlong_buffer.log), that penalty is taken
  out first: verl's score is accuracy + overlong penalty, so a correct but overlong response can
  score <= 0 and would read as wrong.
- correct_from = a column name (e.g. verl's `acc`): that boolean / 0-1 column.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

RewardColumn = str | Sequence[str] | None
OVERLONG = "overlong_reward"  # verl DAPO reward manager, reward_extra_info (overlong_buffer.log)
NOT_REWARD = ("step", "advantage", "difficulty", "_loc", OVERLONG, "overlong")


@dataclass(frozen=True)
class CorrectRule:
    """How correctness is read from a log.

    reward_column: the logged reward column; None = the only reward-like column; a list of
        columns = their (weighted) sum, e.g. TRL's total over several reward functions.
    threshold: correct iff reward > threshold (0.0 fits 0/1 and +-1 rewards; -1 fits verl's
        math_dapo score, +-1 plus an overlong penalty of at most 1 when its key is not logged).
    correct_column: a boolean / 0-1 column naming correctness directly; overrides the threshold.
    reward_weights: one weight per reward column (TRL's GRPOConfig.reward_weights).
    """

    reward_column: RewardColumn = None
    threshold: float = 0.0
    correct_column: str | None = None
    reward_weights: tuple[float, ...] | None = None

    def __post_init__(self) -> None:
        try:
            threshold = float(self.threshold)
        except (TypeError, ValueError):
            raise ValueError(f"threshold must be a number, got {self.threshold!r}") from None
        if math.isnan(threshold):
            raise ValueError("threshold must not be NaN")
        object.__setattr__(self, "threshold", threshold)  # "0" from a YAML string -> 0.0
        if self.reward_weights is not None:
            cols = self.reward_column
            if cols is None or isinstance(cols, str) or len(cols) != len(self.reward_weights):
                raise ValueError(
                    "reward_weights needs reward_column as a list of the same length "
                    f"(got {len(self.reward_weights)} weight(s) for {cols!r})"
                )
            try:
                weights = tuple(float(w) for w in self.reward_weights)
            except (TypeError, ValueError):
                raise ValueError(
                    f"reward_weights must be numbers: {self.reward_weights!r}"
                ) from None
            object.__setattr__(self, "reward_weights", weights)

    def describe(self, cols: list[str] | None, overlong: bool) -> str:
        """The rule in words, for the import report (cols: the reward columns used)."""
        if self.correct_column is not None:
            return f"correct from column {self.correct_column!r}"
        cols = cols or []
        what = " + ".join(cols)
        if self.reward_weights is not None:
            what = " + ".join(f"{w:g}*{c}" for w, c in zip(self.reward_weights, cols, strict=True))
        minus = f" - {OVERLONG}" if overlong else ""
        return f"correct iff {what}{minus} > {self.threshold:g}"


def make_rule(
    reward_column: RewardColumn,
    threshold: float,
    correct_column: str | None,
    correct_from: str | None,
    reward_weights: Sequence[float] | None,
) -> CorrectRule:
    """A CorrectRule from the importer keywords; correct_from 'reward' or a column name."""
    if correct_from not in (None, "reward"):
        if correct_column is not None and correct_column != correct_from:
            raise ValueError(f"correct_from {correct_from!r} contradicts {correct_column=}")
        correct_column = correct_from
    weights = None if reward_weights is None else tuple(reward_weights)
    if isinstance(reward_column, list | tuple):
        reward_column = tuple(reward_column)
    return CorrectRule(reward_column, threshold, correct_column, weights)


def reward_columns(df: pd.DataFrame, rule: CorrectRule, where: str) -> list[str] | None:
    """The columns whose (weighted sum) is the reward; None when only correctness is logged."""
    if rule.reward_column is not None:
        cols = rule.reward_column
        return [cols] if isinstance(cols, str) else list(cols)
    skip = (*NOT_REWARD, rule.correct_column)
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
        + " (a list of columns sums them, reward_weights weighs them)"
    )


def reward_series(df: pd.DataFrame, cols: list[str] | None, rule: CorrectRule) -> pd.Series | None:
    """The reward of each row: the column, or the weighted nansum of the columns, minus verl's
    logged overlong penalty when the rule thresholds it (NaN penalty = none)."""
    if cols is None:
        return None
    subtract = rule.correct_column is None and OVERLONG in df.columns
    if len(cols) == 1 and rule.reward_weights is None and not subtract:
        return df[cols[0]]  # as logged: a non-number is a bad_reward, not a missing value
    values = df[cols].apply(pd.to_numeric, errors="coerce")  # (N, C)
    weights = np.ones(len(cols)) if rule.reward_weights is None else rule.reward_weights
    total = (values * np.asarray(weights)).sum(axis=1, min_count=1)  # TRL's nansum
    if subtract:
        penalty = pd.to_numeric(df[OVERLONG], errors="coerce").fillna(0.0)
        total = total - penalty
    return total

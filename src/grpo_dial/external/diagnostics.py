"""Diagnostics of an imported (or own) run from its per-response table; pure, no I/O.

Input: the per-response schema of importers.RESPONSE_COLUMNS (the trainer's responses table
works too): step, group, prompt_id, reward in {0, 1}, length. Only first-round responses
(resample_round == 0, when the column exists) are used, as in decompose: refill rounds are
biased toward informative prompts.

Silent groups per step. A group of G responses with k correct is silent when k = 0 (all wrong)
or k = G (all correct). Against it, the closed form for a prompt of pass rate p,

    P(silent) = p^G + (1-p)^G,   split  P(all correct) = p^G,  P(all wrong) = (1-p)^G,

with p = the prompt's pass rate observed over the whole run (k/n of all its responses) and G
its group's size, averaged over the step's groups. Using the run-wide p is what an observer of
the log can do; a prompt whose pass rate moves during training makes the measured and the
expected curves part, which is the point of the plot.

Checks (group_checks): G = the most common size of the groups the import left whole (`lost` = 0;
rows skipped as unusable shrink their group); a whole group of another size is unequal (a
prompt repeated within a step that the log's order could not split, or a batch cut by an
evaluation). A run whose every group of two or more responses is informative (0 < k < G) was
filtered before it was logged (verl's DAPO recipe dumps only the groups that passed
filter_groups) when that absence is unlikely: under the closed form at the prompts' run-wide
pass rates p, group g is silent with q_g = p^G + (1-p)^G, independently, so no silent group at
all has probability P0 = prod_g (1 - q_g); the run counts as `filtered` when P0 < FILTERED_P
(0.05), i.e. when the expected count sum_g q_g of silent groups (also reported) makes their
absence unlikely. A filtered run's silent fractions say nothing about the silent rate: the
summary gives them as NaN and `warnings` says why. A few informative groups (P0 >= 0.05) are
not called filtered.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np
import pandas as pd

from grpo_dial.analysis.training.decompose import windows
from grpo_dial.core.theory import silent_rate_split, silent_rate_without_replacement_split
from grpo_dial.passrates.tables import PASSRATE_COLUMNS, validate_passrates

FILTERED_P = 0.05  # a run with no silent group is `filtered` when that had P0 below this
SILENT_COLUMNS = (
    "step", "n_groups", "silent_fraction", "all_correct_fraction", "all_wrong_fraction",
    "expected_silent", "expected_all_correct", "expected_all_wrong",
    "unbiased_all_correct", "unbiased_all_wrong",
)  # fmt: skip
SUMMARY_COLUMNS = ("metric", "value")
SUMMARY_METRICS = (
    "steps", "groups", "group_size", "unequal_groups", "damaged_groups", "group_size_uncertain",
    "all_groups_informative", "expected_silent_groups", "p_no_silent_groups", "filtered",
    "prompts", "responses", "accuracy_first", "accuracy_last", "mean_length_first",
    "mean_length_last", "silent_fraction_first", "silent_fraction_last", "expected_silent_first",
    "expected_silent_last", "length_change", "within_incorrect_share",
    "within_incorrect_share_lo", "within_incorrect_share_hi",
)  # fmt: skip


def _first_round(responses: pd.DataFrame, needed: tuple[str, ...]) -> pd.DataFrame:
    """The first-round rows, after checking columns and 0/1 rewards (one-line ValueErrors)."""
    if not isinstance(responses, pd.DataFrame):
        raise ValueError(f"responses must be a DataFrame, got {type(responses).__name__}")
    missing = [c for c in needed if c not in responses.columns]
    if missing:
        raise ValueError(f"responses table lacks column(s) {missing}")
    df = responses
    if "resample_round" in df.columns:
        df = df[df["resample_round"] == 0]
    if len(df) == 0:
        raise ValueError("responses table has no (first-round) rows")
    bad = ~df["reward"].isin([0, 1])
    if bad.any():
        raise ValueError(
            f"reward must be 1 (correct) or 0 (wrong); found {sorted(df['reward'][bad].unique())}"
        )
    return df


def _groups(df: pd.DataFrame) -> pd.DataFrame:
    """One row per (step, group): prompt_id, k, G, and the prompt's run-wide pass rate p."""
    g = df.groupby(["step", "group"], sort=True)
    if (g["prompt_id"].nunique() > 1).any():
        step, group = g["prompt_id"].nunique().pipe(lambda s: s[s > 1]).index[0]
        raise ValueError(f"group {group} of step {step} holds more than one prompt_id")
    out = g.agg(prompt_id=("prompt_id", "first"), k=("reward", "sum"), G=("reward", "size"))
    out = out.reset_index()
    runwide = df.groupby("prompt_id")["reward"].agg(["sum", "size"])  # c and n per prompt
    out["c"] = out["prompt_id"].map(runwide["sum"]).to_numpy(dtype=float)
    out["n"] = out["prompt_id"].map(runwide["size"]).to_numpy(dtype=float)
    out["p"] = out["c"] / out["n"]  # run-wide k/n per prompt
    return out


def silent_by_step(responses: pd.DataFrame) -> pd.DataFrame:
    """Per step (columns SILENT_COLUMNS): n_groups; measured fractions of silent, all-correct
    (k = G) and all-wrong (k = 0) groups; expected = mean over the step's groups of p^G + (1-p)^G,
    p^G and (1-p)^G with p the prompt's run-wide pass rate and G the group's size; unbiased_* =
    the same closed forms estimated without bias from the prompt's c correct of n run-wide
    responses, C(c, G) / C(n, G) and C(n - c, G) / C(n, G) (the exact without-replacement rate)."""
    df = _first_round(responses, ("step", "group", "prompt_id", "reward"))
    g = _groups(df)
    k, G = g["k"].to_numpy(), g["G"].to_numpy()  # (N_groups,)
    all_correct, all_wrong = silent_rate_split(g["p"].to_numpy(), G)  # (N_groups,) each
    # p^G from the run's own n responses of the prompt is biased upwards when n is small (a prompt
    # seen once in a silent group has p_hat 0 or 1); C(c, G) / C(n, G) is its unbiased estimate.
    c, n = g["c"].to_numpy(np.int64), g["n"].to_numpy(np.int64)  # (N_groups,)
    unbiased_correct, unbiased_wrong = silent_rate_without_replacement_split(c, n, G)
    per_group = pd.DataFrame(
        {
            "step": g["step"].to_numpy(),
            "silent_fraction": ((k == 0) | (k == G)).astype(float),
            "all_correct_fraction": (k == G).astype(float),
            "all_wrong_fraction": (k == 0).astype(float),
            "expected_silent": all_correct + all_wrong,
            "expected_all_correct": all_correct,
            "expected_all_wrong": all_wrong,
            "unbiased_all_correct": unbiased_correct,
            "unbiased_all_wrong": unbiased_wrong,
        }
    )
    by_step = per_group.groupby("step", sort=True)
    out = by_step.mean()
    out.insert(0, "n_groups", by_step.size().astype(np.int64))
    return out.reset_index()[list(SILENT_COLUMNS)]


def group_checks(responses: pd.DataFrame) -> dict[str, float]:
    """groups, group_size G, unequal_groups (size != G), damaged_groups (groups that lost rows in
    the import: `lost` > 0), group_size_uncertain, all_groups_informative (1.0 when every group
    of G >= 2 has 0 < k < G, else 0.0), expected_silent_groups (sum_g q_g over those groups),
    p_no_silent_groups (P0 = prod_g (1 - q_g)) and filtered (all informative and P0 < FILTERED_P;
    module docstring). G = the most common size among the groups that lost no
    row; when every group lost one (or, without a `lost` column, ever), the most common size of
    all, and group_size_uncertain = 1.0 where groups lost rows."""
    df = _first_round(responses, ("step", "group", "prompt_id", "reward"))
    g = _groups(df)
    damaged = (
        df.groupby(["step", "group"], sort=True)["lost"].max().to_numpy() > 0  # g's order
        if "lost" in df.columns
        else np.zeros(len(g), bool)
    )  # (groups,)
    whole = g.loc[~damaged, "G"] if (~damaged).any() else g["G"]
    counts = whole.value_counts()
    size = int(counts[counts == counts.max()].index.min())
    multi = g[g["G"] >= 2]
    informative = (multi["k"] > 0) & (multi["k"] < multi["G"])
    correct, wrong = silent_rate_split(multi["p"].to_numpy(), multi["G"].to_numpy())  # (groups,)
    q = np.clip(correct + wrong, 0.0, 1.0)
    p_none = float(np.exp(np.sum(np.log1p(-q)))) if (q < 1).all() else 0.0
    all_informative = len(multi) > 0 and bool(informative.all())
    return {
        "groups": float(len(g)),
        "group_size": float(size),
        "unequal_groups": float((g["G"] != size).sum()),
        "damaged_groups": float(damaged.sum()),
        "group_size_uncertain": float(bool(damaged.all())),
        "all_groups_informative": float(all_informative),
        "expected_silent_groups": float(q.sum()),
        "p_no_silent_groups": p_none,
        "filtered": float(all_informative and p_none < FILTERED_P),
    }


def run_warnings(summary: pd.DataFrame) -> list[str]:
    """One line per check a run_summary fails, saying what it means for the diagnosis."""
    v = dict(zip(summary["metric"], summary["value"], strict=True))
    out = []
    if v.get("filtered") == 1.0:
        out.append(
            f"every group is informative (0 < k < G) where the closed form expects "
            f"{v['expected_silent_groups']:.1f} silent ones (none with P = "
            f"{v['p_no_silent_groups']:.2g}): the log was most likely filtered before it was "
            "written (verl's DAPO recipe dumps only groups that passed filter_groups), so "
            "silent rates cannot be estimated from it"
        )
    if v.get("group_size_uncertain", 0) == 1.0:
        out.append(
            f"every group lost rows in the import, so G = {v['group_size']:.0f} (their most "
            "common size) is uncertain and so are the silent fractions; give group_size"
        )
    elif v.get("damaged_groups", 0) > 0:
        out.append(
            f"{v['damaged_groups']:.0f} of {v['groups']:.0f} groups lost rows in the import; G = "
            f"{v['group_size']:.0f} from the groups that lost none, and a damaged group's silent "
            "fraction is that of the rows it kept"
        )
    if v.get("unequal_groups", 0) > v.get("damaged_groups", 0):
        out.append(
            f"{v['unequal_groups'] - v.get('damaged_groups', 0):.0f} of {v['groups']:.0f} whole "
            f"groups differ from G = "
            f"{v['group_size']:.0f} (a prompt repeated within a step that the log's order could "
            "not split, or a batch cut by an evaluation); give group_size to check against it"
        )
    return out


def run_passrates(responses: pd.DataFrame, name: str) -> pd.DataFrame:
    """A pass-rate table (passrates schema, validated) of a run: one row per prompt, n = its
    responses over the run, k = the correct ones, p_hat = k/n, mean `length` of its correct and
    of its incorrect responses (NaN where none; in the run's length unit), source = name,
    difficulty = the prompt's first non-missing label (NA without a difficulty column)."""
    df = _first_round(responses, ("prompt_id", "reward", "length"))
    c = df["reward"].to_numpy(dtype=float) == 1  # (N,)
    ln = df["length"].to_numpy(dtype=float)  # (N,)
    parts = pd.DataFrame(
        {
            "prompt_id": df["prompt_id"].to_numpy(),
            "reward": c.astype(np.int64),
            "len_c": np.where(c, ln, np.nan),
            "len_w": np.where(c, np.nan, ln),
        }
    )
    if "difficulty" in df.columns:
        parts["difficulty"] = df["difficulty"].astype("string").to_numpy()
    g = parts.groupby("prompt_id", sort=True)
    table = pd.DataFrame(
        {
            "source": name,
            "difficulty": g["difficulty"].first() if "difficulty" in parts else pd.NA,
            "n": g.size(),
            "k": g["reward"].sum(),
            "mean_len_correct": g["len_c"].mean(),
            "mean_len_incorrect": g["len_w"].mean(),
        }
    ).reset_index()
    table["p_hat"] = table["k"] / table["n"]
    return validate_passrates(table[list(PASSRATE_COLUMNS)])


def _pooled(silent: pd.DataFrame, steps: tuple[int, ...], column: str) -> float:
    """Group-weighted mean of a per-step fraction over the window's steps (NaN if none)."""
    rows = silent[silent["step"].isin(steps)]
    weight = rows["n_groups"].to_numpy(dtype=float)
    if weight.sum() == 0:
        return math.nan
    return float((rows[column].to_numpy(dtype=float) * weight).sum() / weight.sum())


def run_summary(
    responses: pd.DataFrame,
    silent: pd.DataFrame,
    terms: pd.DataFrame,
    fraction: float = 0.1,
) -> pd.DataFrame:
    """Key numbers of a run, one row per SUMMARY_METRICS entry (columns metric, value).

    First / last windows = decompose.windows(steps, fraction) (pass the fraction the terms were
    computed with): accuracy and mean length pooled over the window's first-round responses,
    silent fractions pooled over its groups (from `silent`, a silent_by_step table), measured and
    expected; the expected one is the unbiased closed form, unbiased_all_correct +
    unbiased_all_wrong (the curves the run's figure draws), not the plug-in p^G + (1-p)^G. From
    `terms` (decompose_with_intervals): the total length change and the share of it within
    incorrect responses, with its interval (share_lo, share_hi)."""
    df = _first_round(responses, ("step", "prompt_id", "reward", "length"))
    missing = [c for c in SILENT_COLUMNS if c not in silent.columns]
    if missing:
        raise ValueError(f"silent table lacks column(s) {missing} (use silent_by_step)")
    need = ("quantity", "value", "share", "share_lo", "share_hi")
    if any(c not in terms.columns for c in need):
        raise ValueError(f"terms table needs columns {list(need)} (use decompose_with_intervals)")
    rows = {q: terms[terms["quantity"] == q] for q in ("total", "within_incorrect")}
    if any(len(r) != 1 for r in rows.values()):
        raise ValueError("terms table needs exactly one 'total' and one 'within_incorrect' row")
    first, last = windows(df["step"], fraction)
    checks = group_checks(df)
    values: dict[str, float] = {
        **checks,
        "steps": float(df["step"].nunique()),
        "prompts": float(df["prompt_id"].nunique()),
        "responses": float(len(df)),
    }
    for name, steps in (("first", first), ("last", last)):
        win = df[df["step"].isin(steps)]
        values[f"accuracy_{name}"] = float(win["reward"].mean())
        values[f"mean_length_{name}"] = float(win["length"].mean())
        filtered = checks["filtered"] == 1.0  # silent groups were never logged
        silent_here = math.nan if filtered else _pooled(silent, steps, "silent_fraction")
        values[f"silent_fraction_{name}"] = silent_here
        values[f"expected_silent_{name}"] = _pooled(  # what the figure's dashed curves draw
            silent, steps, "unbiased_all_correct"
        ) + _pooled(silent, steps, "unbiased_all_wrong")
    within = rows["within_incorrect"].iloc[0]
    values["length_change"] = float(rows["total"]["value"].iloc[0])
    values["within_incorrect_share"] = float(within["share"])
    values["within_incorrect_share_lo"] = float(within["share_lo"])
    values["within_incorrect_share_hi"] = float(within["share_hi"])
    return pd.DataFrame(
        {"metric": list(SUMMARY_METRICS), "value": [values[m] for m in SUMMARY_METRICS]}
    )


def diagnose(responses: pd.DataFrame, name: str, params: Mapping) -> dict[str, pd.DataFrame]:
    """Every diagnosis table of one imported run (params: window_fraction, n_boot, seed,
    fidelity)."""
    from grpo_dial.analysis import difficulty
    from grpo_dial.analysis.training import decompose as d

    silent = silent_by_step(responses)
    table = run_passrates(responses, name)
    before, after = d.windows(responses["step"].unique(), fraction=params["window_fraction"])
    terms = d.decompose_with_intervals(
        responses, before, after, n_boot=params["n_boot"], seed=params["seed"]
    )
    return {
        "silent": silent,
        "passrates": table,
        "recommended_g": difficulty.recommended_group_size(table, name,
                                                           fidelity=params["fidelity"]),
        "terms": terms,
        "curves": d.length_curves(responses),
        "summary": run_summary(responses, silent, terms, fraction=params["window_fraction"]),
    }  # fmt: skip

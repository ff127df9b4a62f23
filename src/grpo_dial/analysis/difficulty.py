"""Difficulty analysis of one pass-rate table (the grpo_dial.passrates.tables schema), as tidy
DataFrames.

Every closed form takes p = p_hat = k/n as the prompt's pass rate and comes from
grpo_dial.core.theory:

    gradient-mass share of band B   sum_{j in B} w(p_j) / sum_j w(p_j),  w = sqrt(p(1-p)) (GRPO)
                                    or p(1-p) (Dr. GRPO)
    silent fraction (closed form)   mean_j p_j^G + (1-p_j)^G
    silent fraction (subsampled)    mean_j [C(k_j,G) + C(n_j-k_j,G)] / C(n_j,G) over prompts with
                                    G <= n_j/4 (G drawn without replacement from the n_j rollouts)
    recommended group size          smallest G with fidelity phi(p, G) >= target, and the closed
                                    form 1/(8 eps p(1-p)), eps = 1 - target
    budget allocation               theory.allocate_budget against G = budget per prompt for all

Bands (docs/design-notes.md#reference-numbers): ten equal-width deciles [0, 0.1), ...,
[0.8, 0.9), [0.9, 1.0] (the last closed, so together they partition [0, 1]), and the
overlapping "never" (p = 0), "always" (p = 1), "extreme" (0 < p < 0.1 or 0.9 < p < 1) and
"medium" (0.4 <= p <= 0.6).
Every output carries a `table` column with the table's name (each row's `source` in the
pass-rate table says where a prompt comes from; `table` names the whole table).

Pass rates repeat (k/n takes at most n+1 values), so the costly closed forms are evaluated once
per distinct value and mapped back, which keeps 215,608 Big-Math prompts well under a second.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import pandas as pd
from scipy.stats import hypergeom

from grpo_dial.core import theory
from grpo_dial.core.bands import BAND_INTERVALS, in_band

RECIPES = theory.RECIPES
# (label, ((lo, hi, closed), ...)): a band is a union of disjoint intervals, `closed` as in
# theory.mass_share ("both", "neither", "left", "right").
DECILE_BANDS = tuple(
    (
        f"decile {i + 1} [{i / 10:.1f}, {(i + 1) / 10:.1f}{']' if i == 9 else ')'}",
        ((i / 10, (i + 1) / 10, "both" if i == 9 else "left"),),
    )
    for i in range(10)
)
BANDS = DECILE_BANDS + tuple(  # "never (p=0)", "always (p=1)", "extreme (...)", "medium (...)"
    (f"{name} ({edges})", intervals) for name, (edges, intervals) in BAND_INTERVALS.items()
)


# --------------------------------------------------------------------------- helpers


def _columns(table: pd.DataFrame, name: str, *cols: str) -> tuple[np.ndarray, ...]:
    """The named columns of a non-empty pass-rate table as numpy arrays, with a clear error."""
    if not isinstance(name, str):
        raise ValueError(f"table name must be a string, got {name!r}")
    if not isinstance(table, pd.DataFrame) or len(table) == 0:
        raise ValueError(f"pass-rate table {name!r} is empty or not a DataFrame")
    missing = [c for c in cols if c not in table.columns]
    if missing:
        raise ValueError(f"pass-rate table {name!r} lacks column(s): {', '.join(missing)}")
    return tuple(table[c].to_numpy() for c in cols)


def _per_unique(fn: Callable[..., np.ndarray], *arrays: np.ndarray) -> np.ndarray:
    """fn(*arrays) evaluated once per distinct tuple of elements, then mapped back: (N,).

    fn must be elementwise. Tuples are coded by hashing (pandas.factorize, O(N)), not sorting."""
    n = len(arrays[0])
    key = np.zeros(n, np.int64)  # (N,) mixed-radix code of each tuple
    for a in arrays:
        codes, uniq = pd.factorize(np.asarray(a).ravel(), use_na_sentinel=False)
        key = key * len(uniq) + codes
    inv, uniq = pd.factorize(key)  # (N,) code of each tuple, (U,)
    first = np.empty(len(uniq), np.int64)  # (U,) first row of each distinct tuple
    first[inv[::-1]] = np.arange(n)[::-1]
    return np.asarray(fn(*(np.asarray(a)[first] for a in arrays)))[inv]


def _group_sizes(group_sizes: Sequence[int]) -> list[int]:
    sizes = list(group_sizes)
    if not sizes or any(isinstance(g, bool) or int(g) != g or g < 1 for g in sizes):
        raise ValueError(f"group_sizes must be integers >= 1, got {group_sizes!r}")
    return [int(g) for g in sizes]


# --------------------------------------------------------------------------- tables


def histogram(table: pd.DataFrame, name: str = "passrates", *, bins: int = 20) -> pd.DataFrame:
    """Histogram of p_hat over `bins` equal bins of [0, 1] (last bin closed), plus exact counts.

    Columns: table, kind ("bin", "never" = p_hat == 0, "always" = p_hat == 1), bin_lo, bin_hi,
    count, fraction (of all prompts). The end prompts are also counted in the first/last bin.
    """
    (p,) = _columns(table, name, "p_hat")
    if isinstance(bins, bool) or int(bins) != bins or bins < 1:
        raise ValueError(f"bins must be an integer >= 1, got {bins!r}")
    count, edges = np.histogram(p, bins=int(bins), range=(0.0, 1.0))  # (bins,), (bins+1,)
    ends = np.array([(p == 0).sum(), (p == 1).sum()])  # (2,)
    return pd.DataFrame(
        {
            "table": name,
            "kind": ["bin"] * len(count) + ["never", "always"],
            "bin_lo": np.r_[edges[:-1], 0.0, 1.0],
            "bin_hi": np.r_[edges[1:], 0.0, 1.0],
            "count": np.r_[count, ends].astype(np.int64),
            "fraction": np.r_[count, ends] / len(p),
        }
    )


def mass_shares(table: pd.DataFrame, name: str = "passrates") -> pd.DataFrame:
    """Share of gradient mass per band, sum_{j in B} w(p_j) / sum_j w(p_j), for both recipes.

    Columns: table, band, recipe ("grpo": w = sqrt(p(1-p)); "dr_grpo": w = p(1-p)), share (NaN
    when every prompt is unanimous, so there is no mass), n_prompts (prompts in the band).
    """
    (p,) = _columns(table, name, "p_hat")
    p = p.astype(float)  # (N,)
    rows = []
    for recipe in RECIPES:
        for band, intervals in BANDS:
            share = sum(
                float(theory.mass_share(p, lo, hi, recipe, closed=closed))
                for lo, hi, closed in intervals
            )
            n_band = int(in_band(p, intervals).sum())
            rows.append((name, band, recipe, share, n_band))
    return pd.DataFrame(rows, columns=["table", "band", "recipe", "share", "n_prompts"])


def silent_fractions(
    table: pd.DataFrame, name: str = "passrates", *, group_sizes: Sequence[int] = (4, 8, 16, 32, 64)
) -> pd.DataFrame:
    """Expected fraction of silent (unanimous) groups of size G, split by kind.

    Columns: table, G, method, silent_fraction, all_correct, all_wrong, n_prompts.
    "closed_form": means over all prompts of p^G + (1-p)^G, p^G, (1-p)^G at p = p_hat.
    "subsampled": means over the prompts with G <= n/4 of the hypergeometric
    [C(k,G) + C(n-k,G)] / C(n,G), C(k,G)/C(n,G), C(n-k,G)/C(n,G); no row when no prompt has
    n >= 4G (the quarter keeps the draws close to independent of the logged sample).
    """
    p, n, k = _columns(table, name, "p_hat", "n", "k")
    p, n, k = p.astype(float), n.astype(np.int64), k.astype(np.int64)  # (N,) each
    rows = []
    for G in _group_sizes(group_sizes):
        correct, wrong = theory.silent_rate_split(p, G)  # (N,) each
        silent = theory.silent_rate(p, G)  # (N,)
        rows.append((name, G, "closed_form", silent.mean(), correct.mean(), wrong.mean(), len(p)))
        use = 4 * G <= n  # (N,)
        if not use.any():
            continue
        kng = k[use], n[use], np.full(int(use.sum()), G)  # (M,) each
        silent = _per_unique(theory.silent_rate_without_replacement, *kng)
        correct = _per_unique(lambda c, m, g: hypergeom.pmf(g, m, c, g), *kng)  # all G of k
        wrong = _per_unique(lambda c, m, g: hypergeom.pmf(0, m, c, g), *kng)  # all G of n-k
        rows.append(
            (name, G, "subsampled", silent.mean(), correct.mean(), wrong.mean(), int(use.sum()))
        )
    columns = ["table", "G", "method", "silent_fraction", "all_correct", "all_wrong", "n_prompts"]
    return pd.DataFrame(rows, columns=columns)


def recommended_group_size(
    table: pd.DataFrame, name: str = "passrates", *, fidelity: float = 0.9
) -> pd.DataFrame:
    """Per prompt, the group size that keeps `fidelity` of the infinite-G gain, phi(p, G) >= 1-eps.

    Columns: table, prompt_id, p_hat, fidelity, g_exact (smallest integer G, from
    theory.group_size_exact; -1 = theory.UNREACHABLE for p_hat in {0, 1}, where no G helps),
    g_closed_form (1/(8 eps p(1-p)), float, inf at p_hat in {0, 1}). Summarize by band with
    `recommended_group_size_by_band`.
    """
    ids, p = _columns(table, name, "prompt_id", "p_hat")
    if not 0 < fidelity < 1:
        raise ValueError(f"fidelity must lie strictly between 0 and 1, got {fidelity!r}")
    eps = 1.0 - float(fidelity)
    p = p.astype(float)  # (N,)
    return pd.DataFrame(
        {
            "table": name,
            "prompt_id": ids,
            "p_hat": p,
            "fidelity": float(fidelity),
            "g_exact": _per_unique(lambda q: theory.group_size_exact(q, eps), p).astype(np.int64),
            "g_closed_form": theory.group_size_closed_form(p, eps),
        }
    )


def recommended_group_size_by_band(per_prompt: pd.DataFrame) -> pd.DataFrame:
    """Band summary of `recommended_group_size`: how large G must be across the difficulty range.

    Columns: table, fidelity, band, n_prompts, n_reachable (prompts with a finite G, i.e.
    0 < p_hat < 1), median_g_exact, q90_g_exact (90th percentile), max_g_exact,
    median_g_closed_form; the statistics are over reachable prompts only, NaN when there are none.
    """
    name = str(per_prompt["table"].iloc[0]) if len(per_prompt) else "passrates"
    p, g, g_cf, target = _columns(per_prompt, name, "p_hat", "g_exact", "g_closed_form", "fidelity")
    rows = []
    for band, intervals in BANDS:
        members = in_band(p.astype(float), intervals)  # (N,)
        ok = members & (g != theory.UNREACHABLE)
        stats = (
            (np.median(g[ok]), np.quantile(g[ok], 0.9), g[ok].max(), np.median(g_cf[ok]))
            if ok.any()
            else (np.nan,) * 4
        )
        rows.append((name, float(target[0]), band, int(members.sum()), int(ok.sum()), *stats))
    columns = ["table", "fidelity", "band", "n_prompts", "n_reachable", "median_g_exact"]
    columns += ["q90_g_exact", "max_g_exact", "median_g_closed_form"]
    return pd.DataFrame(rows, columns=columns).astype({"max_g_exact": float})


def allocate_budget(
    p: np.ndarray, budget: int, signal: str, g_min: int = 2, g_max: int = 64
) -> np.ndarray:
    """theory.allocate_budget (skip_unanimous) computed per distinct pass rate: (J,) G_j.

    Prompts are funded exactly as there (stable order of f(g_min), ties to the lower index).
    The top-up takes the largest positive gains f(G+1) - f(G) from the (U, g_max - g_min) table
    of the U distinct pass rates, each entry counted once per funded prompt with that rate,
    instead of the (J, g_max - g_min) table: the same greedy, in memory U/J of it. Where the
    budget ends inside a run of equal gains, the extra samples go to the lowest-index prompts
    of that rate (theory's argpartition picks any of them), so every per-rate total, and with
    it every table of budget_allocation, is the same."""
    theory._choice(signal, theory.SIGNALS, "signal")
    p = theory._prob(p)
    if p.ndim != 1:
        raise ValueError(f"p must be 1-D (one pass rate per prompt), got shape {p.shape}")
    budget = int(theory._int_array(budget, "budget", lo=0))
    g_min, g_max = int(theory._int_array(g_min, "g_min")), int(theory._int_array(g_max, "g_max"))
    if g_max < g_min:
        raise ValueError(f"g_max ({g_max}) must be >= g_min ({g_min})")
    uniq, inv = np.unique(p, return_inverse=True)  # (U,), (J,)
    inv = inv.ravel()
    f = theory.expected_signal(uniq[:, None], np.arange(g_min, g_max + 1), signal)  # (U, W+1)
    alloc = np.zeros(p.size, np.int64)  # (J,)
    cand = np.flatnonzero((p > 0) & (p < 1))
    n_fund = min(cand.size, budget // g_min)
    funded = cand[np.argsort(-f[inv[cand], 0], kind="stable")[:n_fund]]  # (F,)
    alloc[funded] = g_min
    width = g_max - g_min
    count = np.bincount(inv[funded], minlength=uniq.size)  # (U,) funded prompts per rate
    gains = np.diff(f, axis=1)  # (U, W)
    positive = gains > 0
    take = min(budget - g_min * n_fund, int((count[:, None] * positive).sum()))
    if take <= 0 or width == 0:
        return alloc
    u_idx, w_idx = np.nonzero(positive & (count[:, None] > 0))  # candidate entries
    order = np.argsort(-gains[u_idx, w_idx], kind="stable")  # (E,) best first
    u_sorted = u_idx[order]
    reach = np.cumsum(count[u_sorted])  # prompts served once entries up to here are taken
    full = int(np.searchsorted(reach, take, side="right"))  # entries taken for every prompt
    extra = np.bincount(u_sorted[:full], minlength=uniq.size)  # (U,) samples per prompt
    alloc[funded] += extra[inv[funded]]
    left = take - (int(reach[full - 1]) if full else 0)
    if left > 0:  # the boundary entry: its first `left` funded prompts, by index
        u = u_sorted[full]
        members = np.sort(funded[inv[funded] == u])[:left]
        alloc[members] += 1
    return alloc


def budget_allocation(
    table: pd.DataFrame,
    name: str = "passrates",
    *,
    per_prompt_budget: int = 8,
    signal: str = "grpo",
    g_min: int = 2,
    g_max: int = 64,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Uniform G = per_prompt_budget for every prompt against theory.allocate_budget of the same
    total (per_prompt_budget * prompts; unanimous prompts skipped), scored by
    f = theory.expected_signal(p_hat, G, signal).

    Returns (totals, by_band). totals: table, scheme ("uniform", "allocated"), signal, samples
    (sum_j G_j), n_funded (prompts with G_j > 0), expected_signal_total (sum_j f), expected_signal_
    per_sample (total / samples), silent_fraction_expected (mean over funded prompts of
    p^G_j + (1-p)^G_j: the share of sampled groups expected to be unanimous).
    by_band: table, scheme, signal, band, n_prompts, samples, samples_share (of the scheme's).
    """
    (p,) = _columns(table, name, "p_hat")
    p = p.astype(float)  # (N,)
    if isinstance(per_prompt_budget, bool) or int(per_prompt_budget) != per_prompt_budget:
        raise ValueError(f"per_prompt_budget must be an integer, got {per_prompt_budget!r}")
    if per_prompt_budget < 1:
        raise ValueError(f"per_prompt_budget must be >= 1, got {per_prompt_budget}")
    schemes = {
        "uniform": np.full(p.shape, int(per_prompt_budget), np.int64),
        "allocated": allocate_budget(
            p, int(per_prompt_budget) * len(p), signal, g_min=g_min, g_max=g_max
        ),
    }
    totals, bands = [], []
    for scheme, G in schemes.items():  # G: (N,) group size per prompt
        f = _per_unique(lambda q, g: theory.expected_signal(q, g, signal), p, G)
        funded = G > 0  # (N,) unfunded prompts draw no group, so none can be silent
        silent = _per_unique(theory.silent_rate, p[funded], G[funded])
        samples = int(G.sum())
        totals.append(
            (
                name,
                scheme,
                signal,
                samples,
                int(funded.sum()),
                float(f.sum()),
                float(f.sum()) / samples if samples else np.nan,
                float(silent.mean()) if funded.any() else np.nan,
            )
        )
        for band, intervals in BANDS:
            members = in_band(p, intervals)
            spent = int(G[members].sum())
            share = spent / samples if samples else np.nan
            bands.append((name, scheme, signal, band, int(members.sum()), spent, share))
    total_cols = ["table", "scheme", "signal", "samples", "n_funded", "expected_signal_total"]
    total_cols += ["expected_signal_per_sample", "silent_fraction_expected"]
    band_cols = ["table", "scheme", "signal", "band", "n_prompts", "samples", "samples_share"]
    return pd.DataFrame(totals, columns=total_cols), pd.DataFrame(bands, columns=band_cols)


def summary(table: pd.DataFrame, name: str = "passrates") -> pd.DataFrame:
    """Headline numbers, one row per metric (columns: table, metric, value): n_prompts,
    never_solved_fraction, always_solved_fraction, extreme_share_{grpo,dr_grpo},
    medium_share_{grpo,dr_grpo}, silent_fraction_G8 (closed form at p_hat)."""
    (p,) = _columns(table, name, "p_hat")
    p = p.astype(float)
    shares = mass_shares(table, name).set_index(["band", "recipe"])["share"]
    extreme, medium = BANDS[-2][0], BANDS[-1][0]
    metrics = {
        "n_prompts": float(len(p)),
        "never_solved_fraction": float((p == 0).mean()),
        "always_solved_fraction": float((p == 1).mean()),
        **{f"extreme_share_{r}": float(shares[(extreme, r)]) for r in RECIPES},
        **{f"medium_share_{r}": float(shares[(medium, r)]) for r in RECIPES},
        "silent_fraction_G8": float(theory.silent_rate(p, 8).mean()),
    }
    return pd.DataFrame({"table": name, "metric": list(metrics), "value": list(metrics.values())})

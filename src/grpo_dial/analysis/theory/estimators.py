"""Every engine's estimator on one dial, as two tidy tables of the theory stage.

`estimator_mass_table`: the expected gradient mass m(p) = E[(1/G) sum_i A_i (r_i - p)] of each
estimator of core.estimator_mass per pass rate p and group size G (the difficulty-weighting curve
the paper draws for GRPO and Dr. GRPO), its share of its own peak, and its ratio to Dr. GRPO's
p(1-p)(1 - 1/G): a ratio flat in p is Dr. GRPO's weighting of difficulty at another step size.
The batch constants are taken at a batch whose pass rates are `batch_p` (default: the p grid,
a uniform batch).

`estimator_identity_table`: which estimators are Dr. GRPO's operation up to a per-batch constant,
tested numerically through the dial's own advantages (core.advantage.advantages) on random
batches (group sizes 2-16, binary rewards with unanimous groups, rewards with ties, lengths
0-30 tokens). Per batch, c = <A, A_dr> / <A_dr, A_dr> and the residual max|A - c A_dr| / max|A|;
where the estimator is a rescaling (core.estimator_mass.EXACT_RESCALINGS), c is also compared
with the constant its formula predicts, computed here in numpy:

    dr_grpo 1;  rloo G/(G-1);  batch_std 1/(sd_B(r) + eps)^alpha;  gpg B/#{r != 0};
    gpg_paper B/#{i in a group with sigma > 0};  reinforce_pp_baseline (whiten: response)
    1/sqrt(var(A_dr) + 1e-8) (var with ddof std_ddof: the mean of A_dr over responses is 0).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import numpy as np
import pandas as pd

from grpo_dial.core.estimator_mass import (
    EXACT_RESCALINGS,
    MASS_ESTIMATORS,
    SAME_OPERATION,
    estimator_mass,
)

MASS_COLUMNS = ("estimator", "G", "p", "mass", "share_of_peak", "ratio_to_dr_grpo")
IDENTITY_COLUMNS = (
    "estimator", "dial", "relation", "predicted_same", "same_operation", "batches",
    "max_relative_residual", "constant_min", "constant_max", "max_constant_error",
)  # fmt: skip
WHITEN_EPS = 1e-8


def estimator_mass_table(
    ps: Sequence[float], group_sizes: Sequence[int], batch_p: Sequence[float] | None = None
) -> pd.DataFrame:
    """One row per (estimator, G, p) of MASS_COLUMNS (module docstring); ps in (0, 1)."""
    p = np.asarray(ps, dtype=float)
    if p.ndim != 1 or p.size == 0 or ((p <= 0) | (p >= 1)).any():
        raise ValueError("ps must be a non-empty list of pass rates strictly between 0 and 1")
    batch = p if batch_p is None else np.asarray(batch_p, dtype=float)
    frames = []
    for g in group_sizes:
        if int(g) < 2:
            raise ValueError(f"group sizes must be >= 2, got {g!r}")
        dr = estimator_mass(p, int(g), "dr_grpo")
        for name in MASS_ESTIMATORS:
            m = estimator_mass(p, int(g), name, batch_p=batch)
            peak = m.max()
            frames.append(pd.DataFrame({
                "estimator": name, "G": int(g), "p": p, "mass": m,
                "share_of_peak": m / peak if peak > 0 else np.zeros_like(m),
                "ratio_to_dr_grpo": m / dr,
            }))  # fmt: skip
    return pd.concat(frames, ignore_index=True)[list(MASS_COLUMNS)]


def _batch_sd(r: np.ndarray, dial) -> float:
    sd = float(np.std(r, ddof=dial.std_ddof)) if r.size > dial.std_ddof else 0.0
    return 1.0 / (sd + dial.eps) ** dial.std_power


def _whiten_response(a_dr: np.ndarray, dial) -> float:
    var = float((a_dr**2).sum() / max(a_dr.size - dial.std_ddof, 1))
    return 1.0 / np.sqrt(var + WHITEN_EPS)


def _informative(r: np.ndarray, ids: np.ndarray) -> int:
    """Responses in groups whose rewards are not all equal."""
    lo = np.full(ids.max() + 1, np.inf)
    hi = np.full(ids.max() + 1, -np.inf)
    np.minimum.at(lo, ids, r)
    np.maximum.at(hi, ids, r)
    return int((hi > lo)[ids].sum())


# identity row -> (its dial entry, the predicted constant from (rewards, group ids, A_dr, dial))
Predict = Callable[[np.ndarray, np.ndarray, np.ndarray, object], float] | None
IDENTITY_DIALS: Mapping[str, tuple[Mapping[str, object], Predict]] = {
    "dr_grpo": ({"preset": "dr_grpo"}, lambda r, ids, a, d: 1.0),
    "rloo": ({"preset": "rloo"}, lambda r, ids, a, d: (g := np.bincount(ids)[0]) / (g - 1)),
    "batch_std": ({"preset": "batch_std"}, lambda r, ids, a, d: _batch_sd(r, d)),
    "gpg": ({"preset": "gpg"}, lambda r, ids, a, d: r.size / max((r != 0).sum(), 1)),
    "gpg_paper": (
        {"preset": "gpg", "gpg_scale": "informative"},
        lambda r, ids, a, d: r.size / max(_informative(r, ids), 1),
    ),
    "reinforce_pp_baseline_response": (
        {"preset": "reinforce_pp_baseline", "whiten": "response"},
        lambda r, ids, a, d: _whiten_response(a, d),
    ),
    "reinforce_pp_baseline": ({"preset": "reinforce_pp_baseline"}, None),
    "opo": ({"preset": "opo"}, None),
    "grpo": ({"preset": "grpo"}, None),
    "grpo_passk": ({"preset": "grpo_passk"}, None),
    "reinforce_pp": ({"preset": "reinforce_pp"}, None),
}


def _random_batch(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(rewards, group ids, lengths): M groups of one size G (the rescalings' constant needs
    one G per batch), binary rewards (p per group, unanimous groups included) or rewards on
    {0, 0.5, 1} (ties), lengths 0-30 tokens."""
    g, m = int(rng.integers(2, 17)), int(rng.integers(1, 13))
    p = rng.choice([0.0, 1.0, *rng.random(4)], size=m)  # (M,) unanimous groups included
    r = (rng.random((m, g)) < p[:, None]).astype(float)
    if rng.random() < 0.3:
        r = rng.integers(0, 3, (m, g)) / 2.0
    ids = np.repeat(np.arange(m), g)
    return r.reshape(-1), ids, rng.integers(0, 31, m * g)


def estimator_identity_table(n_batches: int = 200, seed: int = 0) -> pd.DataFrame:
    """One row per IDENTITY_DIALS entry of IDENTITY_COLUMNS: the largest residual of A against
    c A_dr over n_batches random batches, the fitted constants' range and, for a rescaling,
    the largest relative error of c against its predicted constant (module docstring).
    same_operation: every residual below 1e-9. Batches whose A_dr is all 0 are skipped."""
    import torch

    from grpo_dial.core.advantage import advantages
    from grpo_dial.core.dial import dial_from_config

    if isinstance(n_batches, bool) or not isinstance(n_batches, int) or n_batches < 1:
        raise ValueError(f"n_batches must be an integer >= 1, got {n_batches!r}")
    dials = {name: dial_from_config(dict(entry)) for name, (entry, _) in IDENTITY_DIALS.items()}
    rng = np.random.default_rng(seed)
    stats = {name: {"res": [], "c": [], "err": []} for name in IDENTITY_DIALS}
    for _ in range(n_batches):
        r, ids, lengths = _random_batch(rng)
        rt, it = torch.from_numpy(r), torch.from_numpy(ids)
        ctx = {"lengths": torch.from_numpy(lengths)}
        a_dr = advantages(rt, it, dials["dr_grpo"]).numpy()
        if not np.abs(a_dr).max() > 0:
            continue
        for name, (_, predict) in IDENTITY_DIALS.items():
            dial = dials[name]
            needs = dial.baseline == "length_weighted" or dial.whiten != "none"
            a = advantages(rt, it, dial, **(ctx if needs else {})).numpy()
            c = float(a @ a_dr / (a_dr @ a_dr))
            s = stats[name]
            s["res"].append(float(np.abs(a - c * a_dr).max() / max(np.abs(a).max(), 1e-300)))
            s["c"].append(c)
            if predict is not None:
                want = predict(r, ids, a_dr, dial)
                s["err"].append(abs(c - want) / abs(want))
    rows = []
    for name, (entry, _) in IDENTITY_DIALS.items():
        s = stats[name]
        if not s["res"]:
            raise ValueError("every random batch was silent; raise n_batches")
        base = name.removesuffix("_response")
        rows.append({
            "estimator": name,
            "dial": ", ".join(f"{k}: {v}" for k, v in entry.items()),
            "relation": SAME_OPERATION.get(base, ""),
            "predicted_same": name in EXACT_RESCALINGS,
            "same_operation": max(s["res"]) < 1e-9,
            "batches": len(s["res"]),
            "max_relative_residual": max(s["res"]),
            "constant_min": min(s["c"]),
            "constant_max": max(s["c"]),
            "max_constant_error": max(s["err"]) if s["err"] else np.nan,
        })  # fmt: skip
    return pd.DataFrame(rows)[list(IDENTITY_COLUMNS)]

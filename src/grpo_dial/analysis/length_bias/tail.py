"""The length twin of the controlled Bernoulli-logit run: a free-length tail under every dial.

Each prompt j has a fixed pass rate p_j (drawn from a pass-rate table as `simulate` draws it) and
two tail parameters, theta_w and theta_c (core.length_drift: geometric tail, continue with
q = sigmoid(theta), mean tail e^theta). Every step it samples a group of G responses: r_i ~
Bernoulli(p_j); the response uses theta_w with probability (1 + a)/2 if wrong and (1 - a)/2 if
correct (awareness a); its tail T_i ~ Geometric(q); |o_i| = core_length + T_i. The step is

    theta += lr * u,   u = sum_i A_i w_i s_i  over the prompt's responses using theta

through the project's own code (analysis.length_bias.step: `advantage.advantages`, `keep_mask` for
DAPO's dropped groups, the arm's aggregator vmapped over batches of M = groups_per_batch groups
for the weights w, and the tail's score s), i.e. gradient descent on sum_b M * policy_loss_b.
Only the tail parameters move: the core's pass rate is held fixed so the measured drift is the
normalizer's alone (`simulate` covers how p moves).

Arms: grpo, dr_grpo, dapo (presets), std_constant (alpha 1, constant normalizer),
nostd_sequence (alpha 0, sequence normalizer) and lambda_pos / lambda_neg (preset lambda_grpo with
lambda fixed at +1 / -1, r = 0.25: GRPO's std factor, the token mean of the M groups of a batch
with response factors f_i = G softmax_{j in g}(h_j^lambda)_i, h = 1 + r z, z the group-standardized
length; arXiv 2510.06870), and the engines' estimators opo_constant (OPO's length-weighted
baseline under the constant normalizer), reinforce_pp_baseline and reinforce_pp (the whitening
over tokens of each batch of M groups, sequence normalizer) and rloo; all with the population
std, eps from the config, and L_max = max_length for the constant normalizer. DAPO redraws a
silent group up to max_resample_rounds times (its own stream) and drops the ones still silent
(mask 0: no tokens in the batch's token count, which is what dropping the rows does to a token
mean).

What lambda does to the drift. (1) A blind tail (a = 0) drifts by exactly 0 in expectation under
lambda's weights too: f depends only on the group's lengths and the routing, which are independent
of the rewards when a = 0, and a group's advantages sum to 0, so E[sum_i A_i w_i s_i] = 0 as for
the other normalizers. (2) For small r, h^lambda = (1 + r z)^lambda ~ 1 + lambda r z and the
softmax gives f_i ~ 1 + lambda r z_i (mean 1 per group): lambda > 0 puts more weight on the
group's longer responses. On the wrong path (A < 0) a long tail's push towards shorter is then
stronger, so lambda > 0 counteracts the wrong-tail inflation, and lambda < 0 amplifies it (long
wrong tails weigh less); at lambda = 0, f = 1 exactly and the arm is the token mean (tested
bit for bit). length_drift.tail_drift has no lambda normalizer: the lambda arms' predicted_*
columns are NaN (the fit's R^2 is taken over the arms with a closed form).

Vectorized over units = (seed, awareness, prompt): every seed draws its own prompts and streams,
shared by all awareness levels and arms (common random numbers); DAPO's batches are random
partitions within one (seed, awareness) block. The closed form (length_drift.tail_drift, the
batch's other groups drawn from the same block for DAPO) is evaluated at each step's parameters.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from grpo_dial.analysis.arms import LENGTH_BIAS_ARMS, LENGTH_BIAS_DEFAULT, analysis_dial
from grpo_dial.analysis.length_bias.step import draw_tails, tail_updates
from grpo_dial.analysis.simulate.controlled import SimulationConfig, draw_initial_p
from grpo_dial.core.checks import opt as _opt
from grpo_dial.core.dial import Dial
from grpo_dial.core.estimator_mass import whitened_tail_drift
from grpo_dial.core.length_drift import correct_tail_mean, tail_drift, wrong_tail_mean

ARMS = LENGTH_BIAS_ARMS


@dataclass(frozen=True)
class LengthBiasConfig:
    """Settings of the length-bias simulation (defaults: the embedded config's)."""

    n_prompts: int = _opt(512, "J, prompts per seed, drawn with replacement from the table.")
    group_size: int = _opt(8, "G, responses per prompt per step.")
    steps: int = _opt(50, "Steps; every prompt is updated once per step.")
    lr: float = _opt(4.0, "Learning rate on the tail parameters (the drift per step is small).")
    seeds: tuple[int, ...] = _opt((0, 1, 2), "Independent replicates (intervals are over these).")
    awareness: tuple[float, ...] = _opt((0.0, 1.0), "Awareness levels a in [0, 1] to run.")
    core_length: int = _opt(12, "Tokens of the core that decides correctness.")
    initial_tail: float = _opt(4.0, "Mean tail length e^theta of both paths at the start.")
    groups_per_batch: int = _opt(16, "M, groups normalized together by DAPO's token mean.")
    max_length: int = _opt(512, "L_max of the constant normalizer (the generation limit).")
    max_resample_rounds: int = _opt(4, "DAPO: redraws of a silent group per step.")
    arms: tuple[str, ...] = _opt(LENGTH_BIAS_DEFAULT, f"Arms to run, any of {ARMS}.")
    interior_only: bool = _opt(True, "Draw p only from 0 < p_hat < 1 (as `simulate`).")
    p_clip: float = _opt(0.02, "p clipped to [p_clip, 1 - p_clip].")
    eps: float = _opt(1e-8, "eps in (sigma + eps).")

    def __post_init__(self) -> None:
        for name, lo in (
            ("n_prompts", 1),
            ("group_size", 1),
            ("steps", 1),
            ("core_length", 1),
            ("groups_per_batch", 1),
            ("max_length", 1),
            ("max_resample_rounds", 0),
        ):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int | np.integer) or v < lo:
                raise ValueError(f"{name} must be an integer >= {lo}, got {v!r}")
        if self.n_prompts % self.groups_per_batch:
            raise ValueError(
                f"n_prompts ({self.n_prompts}) must be a multiple of groups_per_batch "
                f"({self.groups_per_batch})"
            )
        if not (isinstance(self.lr, int | float) and np.isfinite(self.lr) and self.lr >= 0):
            raise ValueError(f"lr must be a finite number >= 0, got {self.lr!r}")
        if not (isinstance(self.initial_tail, int | float) and 0 < self.initial_tail < np.inf):
            raise ValueError(
                f"initial_tail must be a mean tail length > 0, got {self.initial_tail!r}"
            )
        for name, lo, hi in (("awareness", 0.0, 1.0), ("seeds", 0, np.inf)):
            vals = tuple(getattr(self, name))
            if not vals or any(isinstance(v, bool) or not lo <= v <= hi for v in vals):
                raise ValueError(
                    f"{name} must be a non-empty list of values in [{lo}, {hi}], got {vals!r}"
                )
            object.__setattr__(self, name, vals)
        arms = (self.arms,) if isinstance(self.arms, str) else tuple(self.arms)
        if not arms or any(a not in ARMS for a in arms) or len(set(arms)) != len(arms):
            raise ValueError(f"arms must be distinct names from {ARMS}, got {arms!r}")
        object.__setattr__(self, "arms", arms)
        if self.core_length >= self.max_length:
            raise ValueError(
                f"max_length ({self.max_length}) must exceed core_length ({self.core_length})"
            )


def arm_dial(arm: str, config: LengthBiasConfig) -> Dial:
    """The arm's dial (analysis.arms): population std, config eps, rounds and L_max."""
    return analysis_dial(
        arm,
        ARMS,
        std_ddof=0,
        eps=config.eps,
        max_length=config.max_length,
        max_resample_rounds=config.max_resample_rounds,
    )


def _units(p_by_seed: dict[int, np.ndarray], config: LengthBiasConfig) -> pd.DataFrame:
    rows = [
        pd.DataFrame({"seed": s, "awareness": a, "prompt": np.arange(p.size), "p": p})
        for s, p in p_by_seed.items()
        for a in config.awareness
    ]
    return pd.concat(rows, ignore_index=True)


def initial_pass_rates(pool: np.ndarray, config: LengthBiasConfig) -> dict[int, np.ndarray]:
    """seed -> (J,) pass rates drawn as `simulate` draws them, clipped to [p_clip, 1 - p_clip]."""
    out = {}
    for s in config.seeds:
        sim = SimulationConfig(
            n_prompts=config.n_prompts,
            seed=int(s),
            p_clip=config.p_clip,
            interior_only=config.interior_only,
        )
        out[s] = np.clip(draw_initial_p(pool, sim), config.p_clip, 1 - config.p_clip)
    return out


def _rng(seed: int, kind: int) -> np.random.Generator:
    # kind: 0 rewards/routing/tails, 1 DAPO redraws, 2 batch partitions; same for every arm.
    return np.random.default_rng(np.random.SeedSequence([seed, 13]).spawn(3)[kind])


def _predict(
    dial: Dial,
    units: pd.DataFrame,
    tw: np.ndarray,
    tc: np.ndarray,
    config: LengthBiasConfig,
) -> tuple[np.ndarray, np.ndarray]:
    """(U,) closed-form E[u_w], E[u_c] at the current parameters (length_drift.tail_drift; OPO
    under the constant normalizer; estimator_mass.whitened_tail_drift for the whitening over
    tokens, its batch statistics over the (seed, awareness) block); NaN where none exists
    (lambda-GRPO, OPO under another normalizer, pass@k). RLOO's advantage is G/(G-1) times
    the mean baseline's, so is its drift."""
    nan = np.full(len(units), np.nan), np.full(len(units), np.nan)
    if dial.length_norm == "lambda" or dial.baseline == "pass_at_k":
        return nan
    if dial.whiten == "token" or dial.baseline == "length_weighted":
        return _predict_engine(dial, units, tw, tc, config) or nan
    token = dial.length_norm == "token"
    kw = dict(
        group_size=config.group_size,
        std_power=dial.std_power,
        length_norm=dial.length_norm,
        eps=dial.eps,
        silent=dial.silent,
        max_resample_rounds=dial.max_resample_rounds,
        scope="batch" if token else "group",
        n_groups=config.groups_per_batch,
        batchmates="population",
    )
    qw, qc = 1 / (1 + np.exp(-tw)), 1 / (1 + np.exp(-tc))
    pw, pc = np.empty(len(units)), np.empty(len(units))
    blocks = units.groupby(["seed", "awareness"], sort=False).indices if token else {0: slice(None)}
    for idx in blocks.values():
        d = tail_drift(
            units["p"].to_numpy()[idx],
            qw[idx],
            qc[idx],
            config.core_length,
            awareness=units["awareness"].to_numpy()[idx],
            **kw,
        )
        pw[idx], pc[idx] = d.wrong, d.correct
    if dial.baseline == "leave_one_out":
        g = config.group_size
        return pw * g / (g - 1), pc * g / (g - 1)
    return pw, pc


def _predict_engine(
    dial: Dial, units: pd.DataFrame, tw: np.ndarray, tc: np.ndarray, config: LengthBiasConfig
) -> tuple[np.ndarray, np.ndarray] | None:
    """The closed forms of OPO (constant normalizer) and of the whitening over tokens (std_power
    0; sequence, constant or token normalizer, the last over batches of M = groups_per_batch),
    per (seed, awareness) block; None outside them."""
    qw, qc = 1 / (1 + np.exp(-tw)), 1 / (1 + np.exp(-tc))
    p, a = units["p"].to_numpy(), units["awareness"].to_numpy()
    pw, pc = np.empty(len(units)), np.empty(len(units))
    if dial.baseline == "length_weighted":
        if dial.length_norm != "constant" or dial.whiten != "none" or dial.silent != "keep":
            return None
        d = tail_drift(p, qw, qc, config.core_length, config.group_size, dial.std_power,
                       "constant", a, ddof=dial.std_ddof, eps=dial.eps,
                       baseline="length_weighted", max_length=config.max_length)  # fmt: skip
        return d.wrong, d.correct
    if dial.std_power != 0 or dial.length_norm not in ("sequence", "constant", "token") or (
        dial.baseline not in ("mean", "none") or dial.silent != "keep"
    ):  # fmt: skip
        return None
    for idx in units.groupby(["seed", "awareness"], sort=False).indices.values():
        d = whitened_tail_drift(
            p[idx], qw[idx], qc[idx], config.core_length, config.group_size,
            dial.length_norm, a[idx], dial.baseline, config.max_length, config.groups_per_batch,
        )  # fmt: skip
        pw[idx], pc[idx] = d.wrong, d.correct
    return pw, pc


def _run_arm(
    arm: str, units: pd.DataFrame, config: LengthBiasConfig
) -> tuple[list[dict], pd.DataFrame]:
    dial = arm_dial(arm, config)
    g, m, j = config.group_size, config.groups_per_batch, config.n_prompts
    p, a = units["p"].to_numpy(), units["awareness"].to_numpy()  # (U,)
    seed_rows = units.groupby("seed", sort=False).indices  # seed -> unit rows (A*J, in blocks)
    rngs = {s: [_rng(int(s), kind) for kind in range(3)] for s in seed_rows}
    tw = np.full(len(units), np.log(config.initial_tail))  # (U,)
    tc = tw.copy()
    sum_meas, sum_pred = np.zeros((len(units), 2)), np.zeros((len(units), 2))
    rows = []
    for step in range(config.steps):
        r, uses_w, tails = (np.empty((len(units), g), dtype=dt) for dt in (bool, bool, np.int64))
        order = np.empty(len(units), dtype=np.int64)
        for s, idx in seed_rows.items():
            main, redraw, part = rngs[s]
            u = main.random((3, idx.size, g))  # rewards, routing, tails
            rs = u[0] < p[idx, None]  # (n, G)
            if dial.silent == "drop":
                for _ in range(dial.max_resample_rounds):
                    k = rs.sum(axis=1)
                    pending = np.flatnonzero((k == 0) | (k == g))
                    if pending.size == 0:
                        break
                    rs[pending] = redraw.random((pending.size, g)) < p[idx[pending], None]
            uw = u[1] < np.where(rs, (1 - a[idx, None]) / 2, (1 + a[idx, None]) / 2)
            r[idx], uses_w[idx] = rs, uw
            tails[idx] = draw_tails(u[2], np.where(uw, tw[idx, None], tc[idx, None]))
            # batches never cross a (seed, awareness) block: permute within each block of J
            perm = (
                np.argsort(part.random((idx.size // j, j)), axis=1)
                + (np.arange(idx.size // j) * j)[:, None]
            )
            order[idx] = idx[perm.reshape(-1)]
        mw, mc = tail_updates(
            r, uses_w, tails, tw, tc, config.core_length, dial, m, order if m > 1 else None
        )
        pw, pc = _predict(dial, units, tw, tc, config)
        sum_meas += np.stack([mw, mc], axis=1)
        sum_pred += np.stack([pw, pc], axis=1)
        frame = pd.DataFrame(
            {
                "seed": units["seed"],
                "awareness": a,
                "mw": mw,
                "mc": mc,
                "pw": pw,
                "pc": pc,
                "tw": tw,
                "tc": tc,
                "real_w": np.where(~r, tails, 0).sum(1),
                "n_w": (~r).sum(1),
            }
        )
        for (s, aw), f in frame.groupby(["seed", "awareness"], sort=False):
            qw, qc = (1 / (1 + np.exp(-f[col].mean())) for col in ("tw", "tc"))
            rows.append(
                {
                    "arm": arm,
                    "seed": int(s),
                    "awareness": float(aw),
                    "step": step,
                    "measured_drift_wrong": f["mw"].mean(),
                    "predicted_drift_wrong": f["pw"].mean(),
                    "measured_drift_correct": f["mc"].mean(),
                    "predicted_drift_correct": f["pc"].mean(),
                    "theta_wrong": f["tw"].mean(),
                    "theta_correct": f["tc"].mean(),
                    "tail_wrong": float(wrong_tail_mean(qw, qc, aw)),
                    "tail_correct": float(correct_tail_mean(qw, qc, aw)),
                    "realized_tail_wrong": f["real_w"].sum() / max(f["n_w"].sum(), 1),
                }
            )
        tw, tc = tw + config.lr * mw, tc + config.lr * mc
    per_unit = units.assign(
        arm=arm,
        measured_drift_wrong=sum_meas[:, 0] / config.steps,
        measured_drift_correct=sum_meas[:, 1] / config.steps,
        predicted_drift_wrong=sum_pred[:, 0] / config.steps,
        predicted_drift_correct=sum_pred[:, 1] / config.steps,
        final_tail_wrong=np.exp(tw),
        final_tail_correct=np.exp(tc),
    )
    return rows, per_unit


def simulate_length_bias(
    pool: np.ndarray, config: LengthBiasConfig
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Every arm from the same prompts -> (steps_df, prompts_df).

    steps_df, one row per (arm, seed, awareness, step), before that step's update: means over the
    block's J prompts of the measured and closed-form per-group update (before lr) of theta_w and
    theta_c, of theta_w and theta_c themselves, the typical tail of a wrong / correct response
    (E[T | wrong], E[T | correct] at the mean parameters: a mean of e^theta would also grow by
    the random walk's spread alone) and the realized mean tail of the step's wrong responses.
    prompts_df: one row per (arm, seed, awareness, prompt): p, the per-step drifts averaged over
    steps (measured and predicted) and the final mean tails e^theta_w, e^theta_c.
    """
    if not isinstance(config, LengthBiasConfig):
        raise ValueError(f"config must be a LengthBiasConfig, got {type(config).__name__}")
    units = _units(initial_pass_rates(np.asarray(pool, dtype=float), config), config)
    step_rows, frames = [], []
    for arm in config.arms:
        rows, per_unit = _run_arm(arm, units, config)
        step_rows += rows
        frames.append(per_unit)
    return pd.DataFrame(step_rows), pd.concat(frames, ignore_index=True)


def closed_form_curve(
    pool: np.ndarray, config: LengthBiasConfig, grid: tuple[float, ...]
) -> pd.DataFrame:
    """Closed-form drift against awareness at the starting parameters: one row per (arm,
    awareness), the mean over the first seed's prompts of E[u_w] and E[u_c] (before lr)."""
    p = initial_pass_rates(np.asarray(pool, dtype=float), config)[config.seeds[0]]
    theta = np.full(p.size, np.log(config.initial_tail))
    rows = []
    for arm in config.arms:
        dial = arm_dial(arm, config)
        for a in grid:
            units = pd.DataFrame({"seed": 0, "awareness": float(a), "p": p})
            pw, pc = _predict(dial, units, theta, theta, config)
            rows.append(
                {
                    "arm": arm,
                    "awareness": float(a),
                    "predicted_drift_wrong": pw.mean(),
                    "predicted_drift_correct": pc.mean(),
                }
            )
    return pd.DataFrame(rows)

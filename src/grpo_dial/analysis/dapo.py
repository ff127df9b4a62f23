"""Consistency check of the silent-group mass against DAPO's logged all-correct fraction (Fig. 3b).

DAPO's dynamic sampling drops groups with accuracy 0 or 1, the silent mass p^G + (1-p)^G of the
identity; its Fig. 3b logs the all-correct branch with n = 32 evaluation samples, E_p[p^n].
Model (the paper's figure script, exhibit_dapo): training sharpens every pass rate by one
competence warp p_T = p^(1/T), T >= 1, so the all-correct mass is
    m(T) = E_p[p_T^n] = E_p[p^(n/T)],
rising from E[p^n] at T = 1 toward P(p > 0). The plateau (mean of the last 8 logged points) pins
T_end by m(T_end) = plateau (brentq). Competence follows one timescale tau,
    c(t) = (1 - exp(-(t - t0)/tau)) / (1 - exp(-(t1 - t0)/tau)),   t0, t1 = first, last logged step,
so c runs from 0 to 1 over the logged steps, T(t) = 1 + c(t)(T_end - 1), and the curve is m(T(t)).
tau is the only free parameter: least squares, bounded scalar minimization over log tau.
Beside it, a generic two-parameter saturating curve a(1 - exp(-(t - t0)/tau)) (least_squares).
This is a consistency check, not a unique prediction: report both R^2 (seed_stats.r_squared).

Departures from the paper's script, on purpose: c is normalized over the fixed logged range
[t0, t1] in the bootstrap too (the script renormalized over each resample's own steps); m(T(c)) is
tabulated on a c grid over the unique values of p (exact weights) and interpolated; tau is
searched in [span/100, 10 span] instead of fixed step bounds. Bootstrap: resample points with
replacement, refit (plateau and T_end held at the full-data values), R^2 on the resample and the
refitted curve on the logged steps; percentile intervals at `level` (the script used 80%).
"""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import optimize

from grpo_dial.analysis.seed_stats import r_squared

COLUMNS = ("step", "allcorrect_fraction")


def read_dapo_curve(path: str | Path) -> pd.DataFrame:
    """The digitized curve `step, allcorrect_fraction`; lines starting `#` or `"#` are comments."""
    path = Path(path)
    try:
        lines = path.read_text().splitlines()
    except (OSError, UnicodeDecodeError) as err:
        raise ValueError(f"cannot read DAPO curve {path}: {err}") from err
    body = [ln for ln in lines if ln.strip() and not ln.lstrip().startswith(("#", '"#'))]
    try:
        df = pd.read_csv(io.StringIO("\n".join(body)))
    except (pd.errors.ParserError, pd.errors.EmptyDataError) as err:
        raise ValueError(f"DAPO curve {path} is not a CSV: {err}") from err
    if list(df.columns) != list(COLUMNS):
        raise ValueError(f"DAPO curve {path} must have columns {COLUMNS}, got {tuple(df.columns)}")
    df = df.apply(pd.to_numeric, errors="coerce").astype(float)
    if df.isna().any().any():
        raise ValueError(f"DAPO curve {path} has non-numeric or missing values")
    _check_curve(df, str(path))
    return df


def _check_curve(df: pd.DataFrame, where: str) -> None:
    if not set(COLUMNS) <= set(df.columns):
        raise ValueError(f"{where} must have columns {COLUMNS}, got {tuple(df.columns)}")
    step, frac = df["step"].to_numpy(float), df["allcorrect_fraction"].to_numpy(float)
    if step.size < 4:
        raise ValueError(f"{where} needs at least 4 points, got {step.size}")
    if not np.all(np.isfinite(step)) or np.any(np.diff(step) <= 0):
        raise ValueError(f"{where}: steps must be finite and strictly increasing")
    if not np.all(np.isfinite(frac)) or np.any((frac < 0) | (frac > 1)):
        raise ValueError(f"{where}: allcorrect_fraction must be finite and in [0, 1]")


def all_correct_mass(p: np.ndarray, temperature: np.ndarray, eval_samples: int = 32) -> np.ndarray:
    """m(T) = mean_p p^(n/T): the all-correct mass of n samples after the warp p -> p^(1/T)."""
    values, counts = np.unique(np.asarray(p, dtype=float), return_counts=True)  # (U,)
    t = np.atleast_1d(np.asarray(temperature, dtype=float))  # (K,)
    return (values[None, :] ** (eval_samples / t[:, None])) @ counts / counts.sum()  # (K,)


def _solve_t_end(p: np.ndarray, plateau: float, n: int) -> float:
    """T_end >= 1 with m(T_end) = plateau."""
    lo, hi = float(all_correct_mass(p, 1.0, n)[0]), float(np.mean(p > 0))
    if not lo <= plateau < hi:
        raise ValueError(
            f"plateau {plateau:.4f} is out of reach of the warp: with these pass rates the "
            f"all-correct mass runs from {lo:.4f} (T = 1) toward {hi:.4f} (T -> inf)"
        )
    if plateau == lo:
        return 1.0
    # m rises in T; bracket in log T so very flat pass-rate tables still converge.
    f = lambda log_t: float(all_correct_mass(p, np.exp(log_t), n)[0]) - plateau  # noqa: E731
    top = 1.0
    while f(top) <= 0:
        top *= 2
        if top > 60:
            raise ValueError(f"cannot reach plateau {plateau:.4f}: T_end would exceed e^60")
    return float(np.exp(optimize.brentq(f, 0.0, top, xtol=1e-12)))


class _Models:
    """Both curves on a fixed logged range [t0, t1] and competence table; fits take any points."""

    def __init__(self, p: np.ndarray, steps: np.ndarray, t_end: float, n: int, grid_size: int):
        self.t0, self.t1 = float(steps[0]), float(steps[-1])
        span = self.t1 - self.t0
        self.log_tau_bounds = (np.log(span / 100), np.log(10 * span))
        self.c_grid = np.linspace(0.0, 1.0, grid_size)  # (C,)
        self.m_grid = all_correct_mass(p, 1.0 + self.c_grid * (t_end - 1.0), n)  # (C,)

    def closed_form(self, tau: float, t: np.ndarray) -> np.ndarray:
        c = np.expm1(-(t - self.t0) / tau) / np.expm1(-(self.t1 - self.t0) / tau)  # (S,)
        return np.interp(c, self.c_grid, self.m_grid)

    def saturating(self, a: float, tau: float, t: np.ndarray) -> np.ndarray:
        return a * -np.expm1(-(t - self.t0) / tau)

    def fit_closed_form(self, t: np.ndarray, y: np.ndarray) -> float:
        res = optimize.minimize_scalar(
            lambda lt: np.sum((self.closed_form(np.exp(lt), t) - y) ** 2),
            bounds=self.log_tau_bounds,
            method="bounded",
            options={"xatol": 1e-8},
        )
        return float(np.exp(res.x))

    def fit_saturating(self, t: np.ndarray, y: np.ndarray) -> tuple[float, float]:
        lo, hi = self.log_tau_bounds
        res = optimize.least_squares(
            lambda par: self.saturating(par[0], np.exp(par[1]), t) - y,
            x0=[float(np.clip(y.max(), 1e-3, 1.0)), 0.5 * (lo + hi)],
            bounds=([0.0, lo], [1.0, hi]),
            xtol=1e-12,
            ftol=1e-12,
        )
        return float(res.x[0]), float(np.exp(res.x[1]))


def fit_dapo(
    curve_df: pd.DataFrame,
    p: np.ndarray,
    eval_samples: int = 32,
    n_boot: int = 300,
    seed: int = 0,
    level: float = 0.9,
    plateau_points: int = 8,
    grid_size: int = 1001,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Fit the one-timescale closed form and the two-parameter saturating curve to the logged curve.

    fit_summary_df, one row per model ("closed_form", "saturating"): model, n_params, r2, r2_lo,
    r2_hi (bootstrap percentile interval at `level`), tau, plateau (pinned mean of the last
    `plateau_points` points; for saturating its fitted asymptote a), T_end (NaN for saturating).
    curve_df_out, one row per (model, step): step, observed, model, fitted, lo, hi (pointwise band).
    """
    _check_curve(curve_df, "curve_df")
    pr = np.asarray(p, dtype=float)
    if pr.ndim != 1 or pr.size == 0 or not np.all(np.isfinite(pr)) or np.any((pr < 0) | (pr > 1)):
        raise ValueError("p must be a non-empty 1-D array of finite pass rates in [0, 1]")
    for name, v, lo in (
        ("eval_samples", eval_samples, 1),
        ("n_boot", n_boot, 0),
        ("plateau_points", plateau_points, 1),
        ("grid_size", grid_size, 2),
    ):
        if isinstance(v, bool) or not isinstance(v, int | np.integer) or v < lo:
            raise ValueError(f"{name} must be an integer >= {lo}, got {v!r}")
    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1), got {level!r}")
    t = curve_df["step"].to_numpy(float)  # (S,)
    y = curve_df["allcorrect_fraction"].to_numpy(float)  # (S,)
    if plateau_points > t.size:
        raise ValueError(f"plateau_points = {plateau_points} exceeds the {t.size} logged points")

    plateau = float(y[-plateau_points:].mean())
    t_end = _solve_t_end(pr, plateau, eval_samples)
    models = _Models(pr, t, t_end, eval_samples, grid_size)
    tau = models.fit_closed_form(t, y)
    a, tau_s = models.fit_saturating(t, y)
    fitted = {
        "closed_form": models.closed_form(tau, t),
        "saturating": models.saturating(a, tau_s, t),
    }

    rng = np.random.default_rng(seed)
    boot_r2 = {m: np.full(n_boot, np.nan) for m in fitted}
    boot_curve = {m: np.full((n_boot, t.size), np.nan) for m in fitted}  # (B, S)
    for b in range(n_boot):
        idx = rng.integers(0, t.size, t.size)  # (S,)
        tb, yb = t[idx], y[idx]
        tau_b = models.fit_closed_form(tb, yb)
        a_b, tau_sb = models.fit_saturating(tb, yb)
        boot_r2["closed_form"][b] = r_squared(yb, models.closed_form(tau_b, tb))
        boot_r2["saturating"][b] = r_squared(yb, models.saturating(a_b, tau_sb, tb))
        boot_curve["closed_form"][b] = models.closed_form(tau_b, t)
        boot_curve["saturating"][b] = models.saturating(a_b, tau_sb, t)

    q = 100 * np.array([(1 - level) / 2, (1 + level) / 2])
    params = {"closed_form": (1, tau, plateau, t_end), "saturating": (2, tau_s, a, np.nan)}
    summary, curves = [], []
    for m, f in fitted.items():
        r2_lo, r2_hi = _interval(boot_r2[m], q)
        n_params, tau_m, plateau_m, t_end_m = params[m]
        summary.append(
            {
                "model": m,
                "n_params": n_params,
                "r2": r_squared(y, f),
                "r2_lo": r2_lo,
                "r2_hi": r2_hi,
                "tau": tau_m,
                "plateau": plateau_m,
                "T_end": t_end_m,
            }
        )
        band = _interval(boot_curve[m], q)
        curves.append(
            pd.DataFrame(
                {"step": t, "observed": y, "model": m, "fitted": f, "lo": band[0], "hi": band[1]}
            )
        )
    return pd.DataFrame(summary), pd.concat(curves, ignore_index=True)


def _interval(draws: np.ndarray, q: np.ndarray) -> tuple:
    """Percentile interval along axis 0, ignoring NaN draws (a resample of one repeated point)."""
    if draws.shape[0] == 0 or np.all(np.isnan(draws)):
        nan = np.full(draws.shape[1:], np.nan) if draws.ndim > 1 else np.nan
        return nan, nan
    lo, hi = np.nanpercentile(draws, q, axis=0)
    return (float(lo), float(hi)) if draws.ndim == 1 else (lo, hi)

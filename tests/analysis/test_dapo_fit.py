"""DAPO Fig. 3b consistency check: reading the curve, recovering a known timescale, intervals."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from grpo_dial.analysis.dapo import all_correct_mass, fit_dapo, read_dapo_curve

DAPO_CSV = (
    Path(__file__).resolve().parents[3] / "shared/data/dapo/dapo_fig3b_accuracy1_fraction.csv"
)


def _pass_rates(n: int = 3000, seed: int = 0) -> np.ndarray:
    """Big-Math-like: a U-shaped beta mixture read off 64 rollouts (some p exactly 0 or 1)."""
    rng = np.random.default_rng(seed)
    p = np.where(rng.random(n) < 0.5, rng.beta(0.7, 1.6, n), rng.beta(1.6, 0.7, n))
    return rng.binomial(64, p) / 64


def _model_curve(p: np.ndarray, steps: np.ndarray, tau: float, t_end: float) -> np.ndarray:
    """The closed form evaluated directly (no grid): mean_p p^(32/T(t)), T = 1 + c(t)(T_end - 1)."""
    t0, t1 = steps[0], steps[-1]
    c = (1 - np.exp(-(steps - t0) / tau)) / (1 - np.exp(-(t1 - t0) / tau))
    temps = 1 + c * (t_end - 1)
    return np.array([np.mean(p ** (32 / t)) for t in temps])


def test_all_correct_mass_by_hand():
    p = np.array([0.0, 0.5, 0.5, 1.0])
    np.testing.assert_allclose(all_correct_mass(p, [1.0, 32.0]), [(2 * 0.5**32 + 1) / 4, 0.5])


@pytest.mark.skipif(not DAPO_CSV.exists(), reason="shared DAPO curve not present")
def test_reads_real_curve_and_fits():
    curve = read_dapo_curve(DAPO_CSV)
    assert list(curve.columns) == ["step", "allcorrect_fraction"]
    assert (
        len(curve) == 60 and curve["step"].iloc[0] == 71 and curve["step"].is_monotonic_increasing
    )
    assert curve["allcorrect_fraction"].iloc[0] == 0.0
    summary, out = fit_dapo(curve, _pass_rates(), n_boot=60)
    s = summary.set_index("model")
    assert list(s.index) == ["closed_form", "saturating"]
    assert list(summary.columns) == [
        "model", "n_params", "r2", "r2_lo", "r2_hi", "tau", "plateau", "T_end"
    ]  # fmt: skip
    assert s.loc["closed_form", "plateau"] == pytest.approx(
        curve["allcorrect_fraction"][-8:].mean()
    )
    assert (s["r2"] > 0.85).all()
    assert ((s["r2_lo"] <= s["r2"]) & (s["r2"] <= s["r2_hi"])).all()
    assert list(out.columns) == ["step", "observed", "model", "fitted", "lo", "hi"]
    assert len(out) == 2 * len(curve)
    assert (out["lo"] <= out["hi"]).all()


def test_recovers_known_timescale_from_its_own_model():
    p = _pass_rates()
    steps = np.arange(0.0, 9001.0, 150.0)
    y = _model_curve(p, steps, tau=1500.0, t_end=12.0)
    curve = pd.DataFrame({"step": steps, "allcorrect_fraction": y})
    summary, out = fit_dapo(curve, p, n_boot=40, plateau_points=1)
    cf = summary.set_index("model").loc["closed_form"]
    assert cf["T_end"] == pytest.approx(12.0, rel=1e-6)
    assert cf["tau"] == pytest.approx(1500.0, rel=0.01)
    assert cf["r2"] > 0.9999
    fitted = out.loc[out["model"] == "closed_form", "fitted"].to_numpy()
    np.testing.assert_allclose(fitted, y, atol=1e-4)


def test_recovers_timescale_with_noise_and_interval_covers_estimate():
    p = _pass_rates(seed=1)
    steps = np.arange(0.0, 9001.0, 150.0)
    rng = np.random.default_rng(5)
    y = _model_curve(p, steps, tau=1200.0, t_end=20.0) + rng.normal(0, 0.01, steps.size)
    curve = pd.DataFrame({"step": steps, "allcorrect_fraction": np.clip(y, 0, 1)})
    summary, out = fit_dapo(curve, p, n_boot=100, seed=2)
    s = summary.set_index("model")
    assert s.loc["closed_form", "tau"] == pytest.approx(1200.0, rel=0.15)  # noisy plateau pin too
    assert s.loc["closed_form", "r2"] > 0.95
    assert ((s["r2_lo"] <= s["r2"]) & (s["r2"] <= s["r2_hi"])).all()
    band = out[out["model"] == "closed_form"]
    inside = (band["lo"] - 1e-9 <= band["fitted"]) & (band["fitted"] <= band["hi"] + 1e-9)
    assert inside.mean() > 0.9


def test_saturating_curve_recovers_its_parameters():
    steps = np.arange(100.0, 6000.0, 100.0)
    y = 0.55 * (1 - np.exp(-(steps - 100.0) / 900.0))
    curve = pd.DataFrame({"step": steps, "allcorrect_fraction": y})
    summary, _ = fit_dapo(curve, _pass_rates(), n_boot=0)
    sat = summary.set_index("model").loc["saturating"]
    assert sat["plateau"] == pytest.approx(0.55, rel=1e-4)
    assert sat["tau"] == pytest.approx(900.0, rel=1e-4)
    assert sat["r2"] == pytest.approx(1.0, abs=1e-8)
    assert np.isnan(sat["r2_lo"]) and np.isnan(sat["T_end"])


def test_bootstrap_is_seeded():
    steps = np.arange(0.0, 3000.0, 100.0)
    p = _pass_rates(500)
    curve = pd.DataFrame({"step": steps, "allcorrect_fraction": _model_curve(p, steps, 500.0, 5.0)})
    a = fit_dapo(curve, p, n_boot=20, seed=4)
    b = fit_dapo(curve, p, n_boot=20, seed=4)
    pd.testing.assert_frame_equal(a[0], b[0])
    pd.testing.assert_frame_equal(a[1], b[1])


@pytest.mark.parametrize(
    "text",
    [
        "# comment only\n",
        "step,fraction\n1,0.1\n2,0.2\n3,0.3\n4,0.4\n",
        "step,allcorrect_fraction\n1,0.1\n2,x\n3,0.3\n4,0.4\n",
        "step,allcorrect_fraction\n1,0.1\n1,0.2\n3,0.3\n4,0.4\n",
        "step,allcorrect_fraction\n1,0.1\n2,1.2\n3,0.3\n4,0.4\n",
    ],
)
def test_bad_file_raises_naming_path(tmp_path, text):
    path = tmp_path / "curve.csv"
    path.write_text(text)
    with pytest.raises(ValueError, match="curve.csv"):
        read_dapo_curve(path)


def test_missing_or_binary_file_raises(tmp_path):
    with pytest.raises(ValueError, match="nope.csv"):
        read_dapo_curve(tmp_path / "nope.csv")
    path = tmp_path / "blob.csv"
    path.write_bytes(bytes(range(128, 256)))
    with pytest.raises(ValueError, match="blob.csv"):
        read_dapo_curve(path)


def test_comment_styles_are_skipped(tmp_path):
    path = tmp_path / "c.csv"
    path.write_text(
        '"# quoted, comment"\n# plain\nstep,allcorrect_fraction\n1,0\n2,0.1\n3,0.2\n4,0.3\n'
    )
    assert read_dapo_curve(path)["allcorrect_fraction"].tolist() == [0.0, 0.1, 0.2, 0.3]


def test_unreachable_plateau_and_bad_p():
    steps = np.arange(0.0, 1000.0, 100.0)
    curve = pd.DataFrame({"step": steps, "allcorrect_fraction": np.linspace(0, 0.9, steps.size)})
    p = np.array([0.0, 0.0, 0.5, 0.6])  # all-correct mass can never pass P(p > 0) = 0.5
    with pytest.raises(ValueError, match="plateau"):
        fit_dapo(curve, p, n_boot=0)
    with pytest.raises(ValueError, match="p must"):
        fit_dapo(curve, np.array([0.5, np.nan]), n_boot=0)
    with pytest.raises(ValueError, match="n_boot"):
        fit_dapo(curve, np.array([0.5, 0.9]), n_boot=-1)

"""The controlled Bernoulli-logit run: updates vs an explicit loop, closed forms, sample counts."""

from __future__ import annotations

import logging
import math
import statistics
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import binom

from grpo_dial.analysis.arms import ENGINE_ARMS, SIMULATION_DEFAULT
from grpo_dial.analysis.simulate.controlled import (
    SimulationConfig,
    _streams,
    arm_dial,
    draw_initial_p,
    matched_lr,
    simulate,
    step_update,
)
from grpo_dial.analysis.simulate.summary import summarize

SMALL = SimulationConfig(n_prompts=300, steps=30)


def _initial_p(n: int, seed: int = 1) -> np.ndarray:
    """Spread of difficulties, with never- and always-solved prompts (zero-variance groups)."""
    rng = np.random.default_rng(seed)
    p = rng.beta(0.7, 0.9, n)  # (n,)
    p[:5], p[5:10] = 0.0, 1.0
    return p


def _logit(p: np.ndarray) -> np.ndarray:
    return np.log(p) - np.log1p(-p)


@pytest.fixture(scope="module")
def small_run() -> tuple[pd.DataFrame, pd.DataFrame]:
    return simulate(_initial_p(SMALL.n_prompts), SMALL)


def test_tables_shape_and_columns(small_run):
    steps, prompts = small_run
    assert len(steps) == len(SIMULATION_DEFAULT) * SMALL.steps
    assert len(prompts) == len(SIMULATION_DEFAULT) * SMALL.n_prompts
    required = {"arm", "step", "mean_p", "silent_fraction", "all_correct_fraction",
                "all_wrong_fraction", "expected_silent_fraction", "samples", "cumulative_samples",
                "extreme_mass_share", "mean_abs_update"}  # fmt: skip
    assert required <= set(steps.columns)
    assert list(prompts.columns) == ["arm", "prompt", "initial_p", "final_p", "initial_quartile"]
    assert np.isfinite(prompts["final_p"]).all()
    # p in {0, 1} were clipped, so theta stayed finite
    assert prompts["initial_p"].between(SMALL.p_clip, 1 - SMALL.p_clip).all()
    silent = steps["all_correct_fraction"] + steps["all_wrong_fraction"]
    np.testing.assert_allclose(steps["silent_fraction"], silent)
    for _, s in steps.groupby("arm"):
        np.testing.assert_array_equal(s["cumulative_samples"], np.cumsum(s["samples"]))


def _loop_update(r: np.ndarray, p: np.ndarray, std_power: float, eps: float) -> np.ndarray:
    """Slow reference: per prompt, population std, A_i = (r_i - mean) / (sigma + eps)^alpha."""
    out = np.zeros(len(p))
    for j in range(len(p)):
        g = r[j].astype(float)
        mean = g.mean()
        sigma = math.sqrt(sum((x - mean) ** 2 for x in g) / len(g))
        if sigma == 0:
            continue
        adv = [(x - mean) / (sigma + eps) ** std_power for x in g]
        out[j] = sum(a * (x - p[j]) for a, x in zip(adv, g, strict=True)) / len(g)
    return out


@settings(max_examples=60, deadline=None)
@given(
    g=st.integers(1, 9),
    j=st.integers(1, 12),
    seed=st.integers(0, 2**31 - 1),
    arm=st.sampled_from([a for a in SIMULATION_DEFAULT if not a.startswith("hadw")]),
)
def test_step_update_matches_loop_and_identity(g, j, seed, arm):
    rng = np.random.default_rng(seed)
    p = rng.uniform(0.01, 0.99, j)  # (J,)
    r = rng.random((j, g)) < p[:, None]  # (J, G); includes singleton groups when g = 1
    r[0] = True  # always one zero-variance group
    dial = arm_dial(arm, SMALL)
    got = step_update(r, p, dial)
    np.testing.assert_allclose(got, _loop_update(r, p, dial.std_power, dial.eps), atol=1e-12)
    # identity with s+ - s- = 1: sigma^(2 - alpha), up to the tiny eps
    k = r.sum(axis=1)
    sigma = np.sqrt(k * (g - k)) / g
    np.testing.assert_allclose(got, sigma ** (2 - dial.std_power), atol=1e-6)
    assert got[0] == 0.0


def _engine_reference(arm: str, r: np.ndarray, p: np.ndarray, eps: float) -> np.ndarray:
    """(J,) (1/G) sum_i A_i (r_i - p_j) from each engine estimator's formula, in numpy, at the
    simulation's population std and eps (a response is one token)."""
    x = r.astype(float)  # (J, G)
    j, g = x.shape
    a = x - x.mean(1, keepdims=True)  # Dr. GRPO's advantage
    if arm == "rloo":
        a = a * g / (g - 1)
    elif arm == "batch_std":
        a = a / (x.std() + eps)
    elif arm == "gpg":
        a = a * x.size / max(int((x != 0).sum()), 1)
    elif arm == "reinforce_pp_baseline":
        a = (a - a.mean()) / np.sqrt(((a - a.mean()) ** 2).mean() + 1e-8)
    elif arm == "reinforce_pp":
        a = (x - x.mean()) / np.sqrt(x.var() + 1e-8)
    elif arm == "grpo_passk":
        lone = (x.sum(1, keepdims=True) == 1) & (x == 1)  # the unique correct response
        a = lone / (np.sqrt(g - 1) / g + eps)
    return (a * (x - p[:, None])).mean(1)


@settings(max_examples=40, deadline=None)
@given(
    g=st.integers(2, 9),
    j=st.integers(1, 12),
    seed=st.integers(0, 2**31 - 1),
    arm=st.sampled_from(ENGINE_ARMS),
)
def test_engine_arms_step_update_matches_their_formulas(g, j, seed, arm):
    rng = np.random.default_rng(seed)
    p = rng.uniform(0.01, 0.99, j)
    r = rng.random((j, g)) < p[:, None]
    r[0] = True  # a silent group: only REINFORCE++ (no baseline) moves it
    got = step_update(r, p, arm_dial(arm, SMALL))
    np.testing.assert_allclose(got, _engine_reference(arm, r, p, SMALL.eps), atol=1e-12)
    assert (got >= -1e-15).all()  # every update still raises p (module docstring)
    if arm != "reinforce_pp":  # whitened, a silent group moves by -mu/sd, mu = 0 up to rounding
        assert abs(got[0]) < 1e-12 and (arm == "reinforce_pp_baseline" or got[0] == 0.0)


def test_engine_arms_run_and_rank_by_step_size():
    """RLOO is Dr. GRPO at G/(G-1) x the step: at lr x (G-1)/G it is Dr. GRPO's run exactly;
    OPO with one-token responses is Dr. GRPO."""
    pool = _initial_p(200)
    config = SimulationConfig(n_prompts=200, steps=10, arms=("dr_grpo", "opo", "rloo"))
    steps, prompts = simulate(pool, config)
    final = prompts.pivot(index="prompt", columns="arm", values="final_p")
    np.testing.assert_array_equal(final["opo"], final["dr_grpo"])
    assert (final["rloo"] >= final["dr_grpo"]).all() and (final["rloo"] > final["dr_grpo"]).any()
    slow = simulate(pool, replace(config, arms=("rloo",), lr=config.lr * 7 / 8))[1]
    np.testing.assert_allclose(slow["final_p"], final["dr_grpo"], rtol=1e-12)


def _loop_hadw(
    r: np.ndarray, p: np.ndarray, anchor: np.ndarray, eps: float, scale: float
) -> np.ndarray:
    """Slow reference: GRPO's A_i times Phi_i = s exp(-sgn(A_i) (p_hat_j - C_j)), per prompt."""
    out = np.zeros(len(p))
    for j in range(len(p)):
        g = r[j].astype(float)
        mean = g.mean()
        sigma = math.sqrt(sum((x - mean) ** 2 for x in g) / len(g))
        if sigma == 0:
            continue
        for x in g:
            a = (x - mean) / (sigma + eps)
            phi = scale * math.exp(-math.copysign(1.0, a) * (mean - anchor[j]))
            out[j] += a * phi * (x - p[j])
        out[j] /= len(g)
    return out


@settings(max_examples=40, deadline=None)
@given(g=st.integers(1, 9), j=st.integers(1, 12), seed=st.integers(0, 2**31 - 1))
def test_hadw_step_update_matches_loop(g, j, seed):
    rng = np.random.default_rng(seed)
    p = rng.uniform(0.01, 0.99, j)  # (J,)
    r = rng.random((j, g)) < p[:, None]  # (J, G)
    r[0] = True  # a zero-variance group: no update whatever the anchor
    c = float(rng.uniform())
    per_prompt = rng.uniform(0, 1, j)  # (J,)
    for arm, anchor, ref in (("hadw", c, np.full(j, c)), ("hadw_prompt", per_prompt, per_prompt)):
        dial = arm_dial(arm, SMALL)
        got = step_update(r, p, dial, anchor=anchor)
        want = _loop_hadw(r, p, ref, dial.eps, dial.anchor_scale)
        np.testing.assert_allclose(got, want, atol=1e-12)
        assert got[0] == 0.0 and (got >= 0).all()  # Phi > 0 keeps every term's sign
    with pytest.raises(ValueError, match="anchor"):
        step_update(r, p, arm_dial("hadw", SMALL))


def test_hadw_arms_against_a_loop_over_steps():
    """Both HA-DW arms, three steps, against the anchors kept by hand (the batch anchor in the
    paper's warm-up, C_t^- = mean(y_1..y_{t-1}); the prompt anchor as an explicit EMA) and the
    per-prompt loop."""
    cfg = SimulationConfig(n_prompts=50, steps=3, arms=("hadw", "hadw_prompt"))
    _, prompts = simulate(_initial_p(400), cfg)
    dial = arm_dial("hadw", cfg)
    for arm in cfg.arms:
        d = prompts[prompts["arm"] == arm]
        theta = _logit(d["initial_p"].to_numpy())
        rng = np.random.default_rng(_streams(cfg.seed)[1])
        ys, running = [], None
        assert cfg.steps <= dial.anchor_window  # every step in the warm-up
        for _ in range(cfg.steps):
            p = 1 / (1 + np.exp(-theta))
            r = rng.random((cfg.n_prompts, cfg.group_size)) < p[:, None]
            if arm == "hadw":
                ys.append(float(r.mean()))
                c = np.full(cfg.n_prompts, statistics.fmean(ys[:-1] or ys))
            else:
                c = r.mean(axis=1) if running is None else running
                running = 0.9 * c + 0.1 * r.mean(axis=1)
            theta = theta + cfg.lr * _loop_hadw(r, p, c, cfg.eps, dial.anchor_scale)
        np.testing.assert_allclose(d["final_p"], 1 / (1 + np.exp(-theta)), rtol=1e-10)


def test_hadw_boosts_groups_below_the_anchor():
    """At the first step the batch anchor is the batch's own accuracy: a group below it moves
    further than under GRPO, one above it less (both after the scale s); the prompt anchor
    starts at Phi = s, GRPO's step times s."""
    cfg = SimulationConfig(n_prompts=400, steps=1, arms=("grpo", "hadw", "hadw_prompt"))
    _, prompts = simulate(_initial_p(400), cfg)
    step = {
        arm: _logit(d["final_p"].to_numpy()) - _logit(d["initial_p"].to_numpy())
        for arm, d in prompts.groupby("arm")
    }
    s = arm_dial("hadw", cfg).anchor_scale
    np.testing.assert_allclose(step["hadw_prompt"], s * step["grpo"], rtol=1e-12, atol=1e-15)
    moved = step["grpo"] > 0
    ratio = step["hadw"][moved] / (s * step["grpo"][moved])
    assert (ratio > 1).any() and (ratio < 1).any()


def test_first_step_is_sigma_for_grpo_and_sigma_squared_for_dr_grpo():
    cfg = SimulationConfig(n_prompts=500, steps=1, arms=("grpo", "dr_grpo"))
    _, prompts = simulate(_initial_p(500), cfg)
    step = {
        arm: (_logit(d["final_p"].to_numpy()) - _logit(d["initial_p"].to_numpy())) / cfg.lr
        for arm, d in prompts.groupby("arm")
    }
    # GRPO's step is sigma(k, 8) for some k
    sigmas = np.sqrt(np.arange(9) * (8 - np.arange(9))) / 8
    nearest = np.abs(step["grpo"][:, None] - sigmas[None, :]).min(axis=1)
    assert nearest.max() < 1e-6
    # common random numbers: the same groups at step 0, so Dr. GRPO's step is GRPO's squared
    np.testing.assert_allclose(step["dr_grpo"], step["grpo"] ** 2, atol=1e-6)


def test_lr_zero_freezes_p_and_silent_fraction_matches_closed_form():
    cfg = SimulationConfig(n_prompts=2000, steps=20, lr=0.0, arms=("grpo", "dapo"))
    steps, prompts = simulate(_initial_p(cfg.n_prompts), cfg)
    np.testing.assert_allclose(prompts["final_p"], prompts["initial_p"], rtol=1e-12)
    p = prompts.loc[prompts["arm"] == "grpo", "initial_p"].to_numpy()  # (J,) drawn and clipped
    s = p**8 + (1 - p) ** 8  # (J,) silent probability per prompt
    np.testing.assert_allclose(steps["expected_silent_fraction"], s.mean(), rtol=1e-12)
    # pooled over steps the measured fraction is a mean of J*T independent Bernoullis
    for _, d in steps.groupby("arm"):
        se = math.sqrt((s * (1 - s)).mean() / (cfg.n_prompts * cfg.steps))
        assert abs(d["silent_fraction"].mean() - s.mean()) < 4 * se
    # DAPO: a group stays silent after R redraws with probability s^(1 + R)
    dapo = steps[steps["arm"] == "dapo"]
    left = s ** (1 + cfg.max_resample_rounds)
    se = math.sqrt((left * (1 - left)).mean() / (cfg.n_prompts * cfg.steps))
    assert abs(dapo["silent_after_resample"].mean() - left.mean()) < 4 * se
    # round r (0 = first) is drawn for a prompt with probability s^r, G samples each
    rounds = s ** np.arange(cfg.max_resample_rounds + 1)[:, None]  # (R+1, J)
    assert dapo["samples"].mean() == pytest.approx(8 * rounds.sum(), rel=0.02)


def test_dapo_sample_accounting(small_run):
    steps, _ = small_run
    base = SMALL.n_prompts * SMALL.group_size
    dapo = steps[steps["arm"] == "dapo"]
    assert (dapo["samples"] >= base).all()
    assert (dapo["samples"] <= (1 + SMALL.max_resample_rounds) * base).all()
    assert (dapo["samples"] % SMALL.group_size == 0).all()
    assert (dapo["samples"] > base).any()
    assert (dapo["silent_after_resample"] <= dapo["silent_fraction"]).all()
    others = steps[steps["arm"] != "dapo"]
    assert (others["samples"] == base).all()
    np.testing.assert_array_equal(others["silent_after_resample"], others["silent_fraction"])


def test_dapo_without_redraws_is_grpo():
    cfg = SimulationConfig(n_prompts=300, steps=10, max_resample_rounds=0, arms=("grpo", "dapo"))
    _, prompts = simulate(_initial_p(300), cfg)
    a, b = (d["final_p"].to_numpy() for _, d in prompts.groupby("arm"))
    np.testing.assert_array_equal(a, b)


def test_matched_lr_against_binomial_sums():
    cfg = SimulationConfig(n_prompts=40)
    p = np.linspace(0.01, 0.99, 40)
    k = np.arange(9)
    pmf = binom.pmf(k[None, :], 8, p[:, None])  # (J, G+1)
    sigma = np.sqrt(k * (8 - k)) / 8
    expected = cfg.lr * (pmf @ sigma).mean() / (pmf @ sigma**2).mean()
    assert matched_lr(p, cfg) == pytest.approx(expected, rel=1e-10)


def test_lr_matched_arm_mean_initial_step_matches_grpo():
    cfg = SimulationConfig(n_prompts=4000, steps=1, arms=("grpo", "dr_grpo", "dr_grpo_lr_matched"))
    steps, _ = simulate(_initial_p(4000), cfg)
    first = steps.set_index("arm")["mean_abs_update"]
    assert first["dr_grpo_lr_matched"] == pytest.approx(first["grpo"], rel=0.03)
    assert first["dr_grpo"] < 0.7 * first["grpo"]


def test_same_seed_same_tables_other_seed_differs():
    p0 = _initial_p(200)
    cfg = SimulationConfig(n_prompts=200, steps=8)
    a, b = simulate(p0, cfg), simulate(p0, cfg)
    pd.testing.assert_frame_equal(a[0], b[0])
    pd.testing.assert_frame_equal(a[1], b[1])
    c = simulate(p0, replace(cfg, seed=8))
    assert not a[1]["final_p"].equals(c[1]["final_p"])


def test_hardest_quartile_improves_and_grpo_beats_dr_grpo_there(small_run):
    _, prompts = small_run
    q1 = prompts[prompts["initial_quartile"] == 1].groupby("arm")[["initial_p", "final_p"]].mean()
    assert (q1["final_p"] > q1["initial_p"] + 0.05).all()
    assert q1.loc["grpo", "final_p"] > q1.loc["dr_grpo", "final_p"]
    grpo = prompts[prompts["arm"] == "grpo"]
    assert (grpo["final_p"] >= grpo["initial_p"] - 1e-12).all()  # the Bernoulli step is >= 0
    sizes = grpo["initial_quartile"].value_counts()
    assert sorted(sizes.index) == [1, 2, 3, 4] and sizes.max() - sizes.min() <= 1
    assert (
        grpo.loc[grpo["initial_quartile"] == 1, "initial_p"].max()
        <= grpo.loc[grpo["initial_quartile"] == 2, "initial_p"].min()
    )


def test_summarize(small_run):
    steps, prompts = small_run
    summary = summarize(steps, prompts).set_index("arm")
    assert list(summary.index) == list(SIMULATION_DEFAULT)
    for arm, d in steps.groupby("arm"):
        m, f = d["silent_fraction"].to_numpy(), d["expected_silent_fraction"].to_numpy()
        r2 = 1 - ((m - f) ** 2).sum() / ((m - m.mean()) ** 2).sum()
        assert summary.loc[arm, "silent_r2"] == pytest.approx(r2, rel=1e-12)
    # 300 prompts x 30 steps: sampling noise is visible next to the drift, still far above 0
    assert (summary["silent_r2"] > 0.6).all()
    assert summary.loc["grpo", "oversampling_factor"] == 1.0
    dapo = steps[steps["arm"] == "dapo"]
    assert summary.loc["dapo", "samples_total"] == dapo["samples"].sum()
    assert summary.loc["dapo", "oversampling_factor"] > 1.0
    assert summary.loc["dr_grpo_lr_matched", "lr"] > summary.loc["dr_grpo", "lr"] == SMALL.lr
    for arm, d in steps.groupby("arm"):
        silent = d["silent_fraction"].mean()
        assert summary.loc[arm, "mean_silent_fraction"] == pytest.approx(silent)
    assert ((summary["realized_extreme_mass"] > 0) & (summary["realized_extreme_mass"] < 1)).all()


def test_summarize_extreme_mass_and_threshold_by_hand():
    cfg = SimulationConfig(n_prompts=400, steps=1, arms=("grpo",))
    steps, prompts = simulate(_initial_p(400), cfg)
    u = _logit(prompts["final_p"].to_numpy()) - _logit(prompts["initial_p"].to_numpy())
    p = prompts["initial_p"].to_numpy()
    extreme = (p < 0.1) | (p > 0.9)
    row = summarize(steps, prompts).iloc[0]
    assert row["realized_extreme_mass"] == pytest.approx(u[extreme].sum() / u.sum(), rel=1e-9)
    assert row["initial_extreme_mass"] == pytest.approx(row["realized_extreme_mass"], rel=1e-9)
    assert pd.isna(row["steps_to_mean_p_0_9"])
    easy = np.full(100, 0.95)
    row = summarize(*simulate(easy, replace(cfg, n_prompts=100))).iloc[0]
    assert row["steps_to_mean_p_0_9"] == 0


def test_draw_initial_p_and_simulate_use_the_same_draw(caplog):
    table = pd.DataFrame({"p_hat": [0.0, 0.25, 0.5, 1.0]})
    cfg = SimulationConfig(n_prompts=1000, steps=1, arms=("grpo",), interior_only=False)
    p = draw_initial_p(table, cfg)
    assert p.shape == (1000,) and set(np.unique(p)) == {0.0, 0.25, 0.5, 1.0}
    interior = draw_initial_p(table, replace(cfg, interior_only=True))
    assert set(np.unique(interior)) == {0.25, 0.5}
    # a table without interior pass rates (a weak model) falls back to all of them, with a warning
    with caplog.at_level(logging.WARNING, logger="grpo_dial"):
        only_ends = pd.DataFrame({"p_hat": [0.0, 1.0]})
        extreme = draw_initial_p(only_ends, replace(cfg, interior_only=True))
    assert set(np.unique(extreme)) == {0.0, 1.0} and "strictly between 0 and 1" in caplog.text
    np.testing.assert_array_equal(p, draw_initial_p(table["p_hat"].to_numpy(), cfg))
    # every value drawn about equally often (multinomial, 4 sd)
    counts = np.unique(p, return_counts=True)[1]
    assert np.abs(counts - 250).max() < 4 * np.sqrt(1000 * 0.25 * 0.75)
    _, prompts = simulate(table["p_hat"].to_numpy(), cfg)
    np.testing.assert_array_equal(prompts["initial_p"], np.clip(p, cfg.p_clip, 1 - cfg.p_clip))


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"arms": ("grpo", "ppo")}, "arms"),
        ({"group_size": 1}, "group_size"),
        ({"lr": -1.0}, "lr"),
        ({"extreme_band": (0.5, 0.2)}, "extreme_band"),
        ({"max_resample_rounds": -1}, "max_resample_rounds"),
    ],
)
def test_config_validation(kwargs, match):
    with pytest.raises(ValueError, match=match):
        SimulationConfig(**kwargs)


def test_bad_inputs():
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        simulate(np.full(300, 1.5), SMALL)
    with pytest.raises(ValueError, match="1-D"):
        simulate(np.array([]), SMALL)
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        simulate(np.array([0.5, np.nan]), SMALL)
    with pytest.raises(ValueError, match="p_hat"):
        draw_initial_p(pd.DataFrame({"p": [0.5]}), SMALL)
    with pytest.raises(ValueError, match="unknown arm"):
        arm_dial("reinforce", SMALL)

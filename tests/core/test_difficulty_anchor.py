"""HA-DW's difficulty anchor (grpo_dial.core.difficulty_anchor) under its three update rules,
each against a plain-Python loop written from its source, never from the code under test:
'paper' from arXiv 2601.08521 Eqs. 8-11 (sigma_t over the previous m beliefs, Eq. 10) with the
module's stated warm-up, 'released' from the authors' code (github yangfengkai/HA-DW: a deque of
the last k batch accuracies, the current one appended first, its mean the anchor; Phi with
lambda_scale 1.5 and the sign of r_i - mean_g), 'batch_std' from this project's earlier reading.
"""

from __future__ import annotations

import math
import statistics
from collections import deque

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from grpo_dial.core.advantage import advantages
from grpo_dial.core.dial import PRESETS, Dial, dial_settings, preset
from grpo_dial.core.difficulty_anchor import (
    FORMS,
    START,
    AnchorState,
    anchor_before,
    anchor_update,
)

FAST = settings(max_examples=60, deadline=None)
F64 = torch.float64
accuracies = st.lists(st.floats(0.0, 1.0), min_size=1, max_size=30)


def _ref_paper(ys: list[float], eta: float, m: int) -> tuple[list[float], list[float]]:
    """(C_t^-, C_t^+) per step. Eq. 8: C_t^- = C_{t-1}^+ (C_1^- = y_1). Eqs. 9-11: C_t^+ =
    (1 - eta_t) C_t^- + eta_t y_t, eta_t = eta sigma_t, sigma_t = pstdev(C_{t-1}^+..C_{t-m}^+).
    Warm-up (t <= m, fewer than m previous beliefs): C_t^+ = mean(y_1..y_t)."""
    before, beliefs = [], []
    for t, y in enumerate(ys, start=1):
        c_minus = y if t == 1 else beliefs[-1]
        if t <= m:
            c_plus = statistics.fmean(ys[:t])
        else:
            sigma = statistics.pstdev(beliefs[t - 1 - m : t - 1])
            c_plus = (1 - eta * sigma) * c_minus + eta * sigma * y
        before.append(c_minus)
        beliefs.append(c_plus)
    return before, beliefs


def _ref_released(ys: list[float], k: int) -> list[float]:
    """The released trainer: append the batch accuracy to a deque(maxlen=k), then the anchor
    the batch's advantages see is the deque's mean."""
    window, out = deque(maxlen=k), []
    for y in ys:
        window.append(y)
        out.append(statistics.fmean(window))
    return out


def _ref_batch_std(ys: list[float], eta: float, m: int) -> tuple[list[float], list[float]]:
    """(C_t^-, C_t^+): as the paper's update, sigma_t = pstdev(y_{t-m+1..t}) from step 1 on."""
    before, after, c = [], [], None
    for t, y in enumerate(ys, start=1):
        c_minus = y if c is None else c
        sigma = statistics.pstdev(ys[max(0, t - m) : t])
        c = (1 - eta * sigma) * c_minus + eta * sigma * y
        before.append(c_minus)
        after.append(c)
    return before, after


def _run(ys, rate, window, form):
    state, before, after = START, [], []
    for y in ys:
        before.append(anchor_before(state, y, form=form, window=window))
        state = anchor_update(state, y, rate, window, form=form)
        after.append(state.value)
    return before, after, state


@FAST
@given(ys=accuracies, rate=st.sampled_from([0.1, 0.5, 1.0]), window=st.integers(2, 6))
def test_paper_anchor_matches_eqs_8_to_11(ys, rate, window):
    before, after, state = _run(ys, rate, window, "paper")
    want_before, want_after = _ref_paper(ys, rate, window)
    np.testing.assert_allclose(before, want_before, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(after, want_after, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(state.history, want_after[-window:], rtol=1e-12, atol=1e-15)
    assert min(ys) - 1e-15 <= state.value <= max(ys) + 1e-15


@FAST
@given(ys=accuracies, window=st.integers(2, 12))
def test_released_anchor_is_the_mean_of_the_last_k_accuracies(ys, window):
    before, after, state = _run(ys, 0.1, window, "released")
    want = _ref_released(ys, window)
    np.testing.assert_allclose(before, want, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(after, want, rtol=1e-12, atol=1e-15)  # C^+ = the C^- it used
    assert state.history == tuple(ys[-window:])


@FAST
@given(ys=accuracies, rate=st.sampled_from([0.1, 0.5, 1.0]), window=st.integers(2, 6))
def test_batch_std_anchor_matches_the_earlier_reading(ys, rate, window):
    before, after, state = _run(ys, rate, window, "batch_std")
    want_before, want_after = _ref_batch_std(ys, rate, window)
    np.testing.assert_allclose(before, want_before, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(after, want_after, rtol=1e-12, atol=1e-15)
    assert state.history == tuple(ys[-window:])


def test_the_three_rules_differ_on_a_rising_accuracy():
    """Accuracy rising smoothly 0.39 -> 0.58 over 100 steps: the released mean of the last 10
    follows (the mean of the last ten values); under the paper's rule and the earlier reading
    sigma_t is tiny on so smooth a ramp (no batch noise), so both stay near the start. Hand
    numbers for the first steps of the paper's rule."""
    ys = list(np.linspace(0.39, 0.58, 100))
    forms = ("paper", "released", "batch_std")
    last = {f: _run(ys, 0.1, 10 if f == "released" else 8, f)[1][-1] for f in forms}
    assert last["released"] == pytest.approx(statistics.fmean(ys[-10:]), rel=1e-12)
    assert max(last["paper"], last["batch_std"]) < 0.40 < 0.57 < last["released"] < ys[-1]
    _, after, _ = _run([0.2, 0.6, 0.4], 0.5, 2, "paper")
    # warm-up: 0.2, mean(0.2, 0.6) = 0.4; t = 3: sigma = pstdev(0.2, 0.4) = 0.1, eta_t = 0.05
    assert after == pytest.approx([0.2, 0.4, 0.95 * 0.4 + 0.05 * 0.4], rel=1e-14)
    _, after, _ = _run([0.2, 0.6, 0.4, 1.0], 0.5, 2, "paper")
    # t = 4: beliefs (0.4, 0.4) are flat, so sigma = 0 and the anchor holds (Eq. 10 read literally)
    assert after[-1] == pytest.approx(0.4, rel=1e-14)


def test_first_batch_is_its_own_anchor_under_every_rule():
    assert math.isnan(START.value) and START.history == ()
    for form in ("paper", "released", "batch_std"):
        assert anchor_before(START, 0.3, form=form, window=4) == 0.3
        assert anchor_update(START, 0.3, 0.5, 4, form=form) == AnchorState(0.3, (0.3,))


@pytest.mark.parametrize(
    "call, word",
    [
        (lambda: anchor_update(START, 0.5, 0.0, 4), "rate"),
        (lambda: anchor_update(START, 0.5, 1.5, 4), "rate"),
        (lambda: anchor_update(START, 0.5, 0.1, 1), "window"),
        (lambda: anchor_update(START, 1.2, 0.1, 4), "accuracy"),
        (lambda: anchor_update(START, -0.1, 0.1, 4), "accuracy"),
        (lambda: anchor_update(START, math.nan, 0.1, 4), "accuracy"),
        (lambda: anchor_update(START, 0.5, 0.1, 4, form="ema"), "anchor update"),
        (lambda: anchor_before(START, 2.0), "accuracy"),
        (lambda: anchor_before(START, 0.5, form="released"), "window"),
    ],
)
def test_anchor_bad_inputs_raise_one_line(call, word):
    with pytest.raises(ValueError, match=word) as err:
        call()
    assert "\n" not in str(err.value)


# ------------------------------------------------------------------ presets and defaults


def test_presets_follow_the_papers():
    hadw, released = preset("hadw_grpo"), preset("hadw_released")
    assert (hadw.anchor, hadw.anchor_update, hadw.anchor_scale) == ("batch", "paper", 1.5)
    got = (released.anchor_update, released.anchor_window, released.anchor_scale)
    assert got == ("released", 10, 1.5)
    assert preset("lambda_grpo").lambda_r == pytest.approx(1 / 9, rel=1e-15)
    # the earlier defaults stay reachable as plain fields
    old = Dial(anchor="batch", anchor_update="batch_std", anchor_scale=1.0, lambda_r=0.25)
    assert (old.anchor_update, old.anchor_scale, old.lambda_r) == ("batch_std", 1.0, 0.25)
    assert set(PRESETS) >= {"hadw_grpo", "hadw_released"}
    assert dial_settings()["anchor_update"].choices == FORMS  # one list: the module's rules
    with pytest.raises(ValueError, match="anchor_update"):
        Dial(anchor="batch", anchor_update="ema")


def _released_advantages(scores, index, hist):
    """The released HA-DW estimator written from its loop: per group mean and unbiased std,
    scale = 1.5 exp(-sign(gmean - hist_mean) sign(r - gmean) |gmean - hist_mean|),
    A = scale (r - gmean) / (gstd + 1e-6); hist_mean the mean of the accuracy deque."""
    hist_mean = statistics.fmean(hist)
    by = {}
    for i, g in enumerate(index):
        by.setdefault(g, []).append(scores[i])
    out = []
    for i, g in enumerate(index):
        gmean, gstd = statistics.fmean(by[g]), statistics.stdev(by[g])
        diff = gmean - hist_mean
        direction = -np.sign(diff) * np.sign(scores[i] - gmean)
        out.append(1.5 * math.exp(direction * abs(diff)) * (scores[i] - gmean) / (gstd + 1e-6))
    return out


@FAST
@given(seed=st.integers(0, 2**32 - 1), steps=st.integers(1, 14))
def test_released_preset_reproduces_the_released_estimator(seed, steps):
    """Batches of binary rewards over several steps (groups of 2-8, no singletons: the released
    code gives a singleton mean 0 and std 1, ours A = 0): with the released code's sample std
    the preset's advantages are the released loop's at every step."""
    rng = np.random.default_rng(seed)
    dial = preset("hadw_released").replace(std_ddof=1)
    state, window = START, deque(maxlen=dial.anchor_window)
    for _ in range(steps):
        sizes = rng.integers(2, 9, rng.integers(1, 6))
        index = np.repeat(np.arange(len(sizes)), sizes)
        r = (rng.random(len(index)) < rng.random()).astype(float)
        y = float(r.mean())
        window.append(y)
        c = anchor_before(state, y, form=dial.anchor_update, window=dial.anchor_window)
        got = advantages(torch.tensor(r), torch.tensor(index), dial, anchor=c)
        want = _released_advantages(r.tolist(), index.tolist(), list(window))
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-12, atol=1e-12)
        state = anchor_update(state, y, dial.anchor_rate, dial.anchor_window, form="released")


# ------------------------------------------------------------------ the sign under strata


def test_hadw_sign_is_the_group_advantage_of_the_raw_rewards_under_strata():
    """Group rewards (1, 0.6, 0, 0.5), mean 0.525: the 0.5 response is below its group but
    above its stratum (0, 0.5), so its blended advantage (beta = 1) is positive while its group
    advantage is negative; Phi takes the group's sign: e^{+(p_hat - C)}, not e^{-(p_hat - C)}."""
    r = torch.tensor([1.0, 0.6, 0.0, 0.5], dtype=F64)
    ids, strata = torch.zeros(4, dtype=torch.long), torch.tensor([0, 0, 1, 1])
    dial = Dial(strata="s", strata_blend=1.0, anchor="batch", anchor_scale=1.0, eps=0.0)
    plain = advantages(r, ids, dial.replace(anchor="none"), strata=strata)
    got = advantages(r, ids, dial, strata=strata, anchor=0.2)
    assert plain[3] > 0  # stratum (0, 0.5): 0.5 is its stratum's upper half
    phi = got / plain
    p_hat = 0.525
    up, down = math.exp(-(p_hat - 0.2)), math.exp(p_hat - 0.2)
    want = [up, up, down, down]  # signs of r - 0.525: +, +, -, -
    torch.testing.assert_close(phi, torch.tensor(want, dtype=F64), rtol=1e-12, atol=0)

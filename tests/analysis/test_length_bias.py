"""Tests for the length-bias simulation: the step through the project's code against token-level
autograd of policy_loss, the run against the closed form, the summaries, config errors, stage."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch
from torch.func import vmap

from grpo_dial.analysis.arms import ANALYSIS_ARMS, LENGTH_BIAS_DEFAULT
from grpo_dial.analysis.length_bias import step as length_step
from grpo_dial.analysis.length_bias import tail as lb
from grpo_dial.analysis.length_bias.step import draw_tails, response_weights, tail_updates
from grpo_dial.analysis.length_bias.summary import fit, summarize
from grpo_dial.core.advantage import advantages, keep_mask, make_aggregator, policy_loss
from grpo_dial.core.estimator_mass import whitened_tail_drift

LAMBDA_ARMS = ("lambda_pos", "lambda_neg")


def _reference(rewards, uses_w, tails, tw0, tc0, c, dial, m):
    """Loop over batches: per-token log-probs, policy_loss of each batch, autograd (no vmap)."""
    j, g = rewards.shape
    tw = torch.tensor(tw0, dtype=torch.float64, requires_grad=True)
    tc = torch.tensor(tc0, dtype=torch.float64, requires_grad=True)
    total = 0.0
    for b in range(j // m):
        rows = slice(b * m, (b + 1) * m)
        r = torch.tensor(rewards[rows].reshape(-1), dtype=torch.float64)
        ids = torch.arange(m).repeat_interleave(g)
        length = torch.from_numpy(c + tails[rows].reshape(-1))
        ctx = (
            {"lengths": length}
            if dial.baseline == "length_weighted" or dial.whiten == "token"
            else {}
        )
        adv, keep = advantages(r, ids, dial, **ctx), keep_mask(r, ids, dial)
        w = torch.from_numpy(uses_w[rows].reshape(-1))
        theta = torch.where(w, tw[rows].repeat_interleave(g), tc[rows].repeat_interleave(g))
        length = torch.from_numpy(c + tails[rows].reshape(-1))
        width = int(c + tails.max())
        pos = torch.arange(width)[None, :]
        mask = (pos < length[:, None]) & keep[:, None]
        cont = (pos >= c) & (pos < length[:, None])
        last = pos == length[:, None] - 1
        lq = torch.nn.functional.logsigmoid(theta)[:, None]
        l1q = torch.nn.functional.logsigmoid(-theta)[:, None]
        logp = torch.where(cont, lq, 0.0) + torch.where(last, l1q, 0.0)
        total = total + m * policy_loss(logp, logp.detach(), adv, mask, dial, ids)
    gw, gc = torch.autograd.grad(total, (tw, tc))
    return -gw.numpy(), -gc.numpy()


@pytest.mark.parametrize("arm", lb.ARMS)
@pytest.mark.parametrize("m", [1, 3])
def test_tail_updates_equal_autograd_of_policy_loss(arm, m):
    rng = np.random.default_rng(1)
    j, g, c = 6, 4, 3
    rewards = rng.random((j, g)) < 0.5
    rewards[0] = True  # a silent group (DAPO drops it)
    uses_w = rng.random((j, g)) < 0.5
    tw0, tc0 = rng.normal(0.5, 0.5, j), rng.normal(0.0, 0.5, j)
    tails = draw_tails(rng.random((j, g)), np.where(uses_w, tw0[:, None], tc0[:, None]))
    dial = lb.arm_dial(arm, lb.LengthBiasConfig(n_prompts=6, groups_per_batch=m, max_length=50))
    uw, uc = tail_updates(rewards, uses_w, tails, tw0, tc0, c, dial, m)
    rw, rc = _reference(rewards, uses_w, tails, tw0, tc0, c, dial, m)
    np.testing.assert_allclose(uw, rw, rtol=1e-9, atol=1e-15)
    np.testing.assert_allclose(uc, rc, rtol=1e-9, atol=1e-15)
    if dial.whiten == "none":  # whitened, a silent group moves by -mu / sd
        assert uw[0] == 0 and uc[0] == 0  # a silent group moves nothing


def test_batch_order_permutes_batches_not_results():
    rng = np.random.default_rng(2)
    j, g = 8, 4
    r, w = rng.random((j, g)) < 0.5, rng.random((j, g)) < 0.5
    t = rng.integers(0, 6, (j, g))
    tw, tc = np.zeros(j), np.zeros(j)
    dial = lb.arm_dial("grpo", lb.LengthBiasConfig(n_prompts=8, groups_per_batch=2))
    a = tail_updates(r, w, t, tw, tc, 2, dial, 2)
    b = tail_updates(r, w, t, tw, tc, 2, dial, 2, batch_order=rng.permutation(j))
    np.testing.assert_allclose(a[0], b[0])  # sequence weights do not depend on the batch


@pytest.mark.parametrize("m", [1, 3])
def test_lambda_zero_is_the_token_mean_bit_for_bit(m):
    """lambda = 0: f = 1 exactly, so the lambda arm's update is the token mean's (scope 'group'
    at M = 1, the batch of M groups otherwise), silent groups kept as lambda-GRPO keeps them."""
    rng = np.random.default_rng(3)
    j, g, c = 6, 4, 3
    rewards, uses_w = rng.random((j, g)) < 0.5, rng.random((j, g)) < 0.5
    rewards[0] = True
    tw0, tc0 = rng.normal(0.5, 0.5, j), rng.normal(0.0, 0.5, j)
    tails = draw_tails(rng.random((j, g)), np.where(uses_w, tw0[:, None], tc0[:, None]))
    config = lb.LengthBiasConfig(n_prompts=6, groups_per_batch=m)
    zero = lb.arm_dial("lambda_pos", config).replace(lambda_value=0.0)
    token = lb.arm_dial("grpo", config).replace(length_norm="token")
    a = tail_updates(rewards, uses_w, tails, tw0, tc0, c, zero, m)
    b = tail_updates(rewards, uses_w, tails, tw0, tc0, c, token, m)
    np.testing.assert_array_equal(a[0], b[0])
    np.testing.assert_array_equal(a[1], b[1])
    lengths, keep = c + tails.reshape(-1), np.ones(j * g, bool)
    np.testing.assert_array_equal(
        response_weights(lengths, keep, zero, m * g, m),
        response_weights(lengths, keep, token, m * g, m),
    )


def _old_response_weights(lengths, keep, dial, rows, m):
    """response_weights as it was before the lambda arms: the aggregator vmapped, no group ids."""
    length = torch.from_numpy(np.asarray(lengths, dtype=np.int64))
    pos = torch.arange(int(length.max()))[None, :]
    mask = (pos < length[:, None]) & torch.from_numpy(np.asarray(keep, dtype=bool))[:, None]
    loss = torch.zeros(mask.shape, dtype=torch.float64, requires_grad=True)
    nb, width = length.numel() // rows, mask.shape[1]
    per_batch = vmap(make_aggregator(dial))(loss.view(nb, rows, width), mask.view(nb, rows, width))
    (grad,) = torch.autograd.grad(m * per_batch.sum(), loss)
    return grad[:, 0].numpy()


def test_other_arms_are_bit_identical_to_the_code_before_lambda(monkeypatch):
    pool = np.random.default_rng(4).beta(0.6, 0.6, 2000)
    old = tuple(a for a in LENGTH_BIAS_DEFAULT if a not in LAMBDA_ARMS)
    config = lb.LengthBiasConfig(n_prompts=32, steps=4, seeds=(0, 1), arms=old)
    new = lb.simulate_length_bias(pool, config)
    monkeypatch.setattr(length_step, "response_weights", _old_response_weights)
    before = lb.simulate_length_bias(pool, config)
    for a, b in zip(new, before, strict=True):
        pd.testing.assert_frame_equal(a, b, check_exact=True)


def test_response_weights_are_the_aggregators_gradient():
    lengths = np.array([3, 5, 2, 7])
    dial = lb.arm_dial("dapo", lb.LengthBiasConfig(n_prompts=4, groups_per_batch=1))
    from grpo_dial.analysis.length_bias.step import response_weights

    w = response_weights(lengths, np.ones(4, bool), dial, rows=2, m=1)
    np.testing.assert_allclose(w, [1 / 8, 1 / 8, 1 / 9, 1 / 9])
    seq = response_weights(lengths, np.ones(4, bool), dial.replace(length_norm="sequence"), 4, 2)
    np.testing.assert_allclose(seq, 2 / (4 * lengths))


SMALL = dict(n_prompts=64, steps=12, seeds=(0, 1, 2), groups_per_batch=16, lr=4.0)


@pytest.fixture(scope="module")
def run():
    pool = np.random.default_rng(0).beta(0.6, 0.6, 5000)
    config = lb.LengthBiasConfig(**SMALL)
    steps, prompts = lb.simulate_length_bias(pool, config)
    return steps, prompts, config, pool


def test_simulation_matches_the_closed_form_and_blind_is_zero(run):
    steps, _, _, _ = run
    summary = summarize(steps).set_index(["arm", "awareness"])
    for arm in LENGTH_BIAS_DEFAULT:
        blind = summary.loc[(arm, 0.0)]
        if arm in LAMBDA_ARMS:  # no closed form; the measured blind drift is still 0 (below)
            assert np.isnan(blind["predicted_drift_wrong"])
        else:
            assert blind["predicted_drift_wrong"] == pytest.approx(0, abs=1e-15)
        s = steps[(steps["arm"] == arm) & (steps["awareness"] == 0)]
        se = s["measured_drift_wrong"].std() / np.sqrt(len(s))
        assert abs(s["measured_drift_wrong"].mean()) < 4 * se + 1e-12
    for arm in ("grpo", "nostd_sequence"):
        s = steps[(steps["arm"] == arm) & (steps["awareness"] == 1)]
        diff = s["measured_drift_wrong"] - s["predicted_drift_wrong"]
        assert abs(diff.mean()) < 4 * diff.std() / np.sqrt(len(s))
        assert s["predicted_drift_wrong"].mean() > 8 * diff.std() / np.sqrt(len(s))
    for arm in ("dr_grpo", "std_constant"):
        assert summary.loc[(arm, 1.0), "predicted_drift_wrong"] == 0
    aware = summary.loc[("grpo", 1.0)]
    assert aware["tail_wrong_end"] > aware["tail_wrong_start"] > aware["tail_correct_end"]
    ratio = summary.loc[("nostd_sequence", 1.0)]
    assert ratio["measured_ratio_to_grpo_lo"] < ratio["predicted_ratio_to_grpo"]
    assert ratio["predicted_ratio_to_grpo"] < ratio["measured_ratio_to_grpo_hi"]


def test_lambda_counteracts_or_amplifies_the_wrong_tail_inflation(monkeypatch):
    """f_i ~ 1 + lambda r z_i: lambda > 0 weighs long responses up, so an aware wrong tail is
    pushed shorter (and a correct one longer); lambda < 0 inflates the wrong tail like GRPO.
    The lever is lambda r: at the preset's r = 1/9 the arms run lambda = +-2.25 (lambda r =
    0.25, the lever of lambda +-1 at the earlier r = 0.25) so the small run resolves it; the
    sign holds at any r > 0."""
    for arm, lam in (("lambda_pos", 2.25), ("lambda_neg", -2.25)):
        monkeypatch.setitem(
            ANALYSIS_ARMS, arm,
            {"preset": "lambda_grpo", "lambda_learnable": False, "lambda_value": lam},
        )  # fmt: skip
    pool = np.random.default_rng(0).beta(0.6, 0.6, 5000)
    config = lb.LengthBiasConfig(**SMALL, arms=tuple(LAMBDA_ARMS))
    steps = lb.simulate_length_bias(pool, config)[0]
    aware = steps[steps["awareness"] == 1].groupby("arm")
    mean = aware[["measured_drift_wrong", "measured_drift_correct"]].mean()
    se = aware[["measured_drift_wrong", "measured_drift_correct"]].std() / np.sqrt(
        aware.size().to_numpy()[:, None]
    )
    assert mean.loc["lambda_pos", "measured_drift_wrong"] < -4 * se.loc["lambda_pos"].iloc[0]
    assert mean.loc["lambda_pos", "measured_drift_correct"] > 4 * se.loc["lambda_pos"].iloc[1]
    assert mean.loc["lambda_neg", "measured_drift_wrong"] > 4 * se.loc["lambda_neg"].iloc[0]
    assert mean.loc["lambda_neg", "measured_drift_correct"] < -4 * se.loc["lambda_neg"].iloc[1]


def test_fit_ignores_arms_without_a_closed_form(run):
    steps = run[0]
    with_lambda = fit(steps)
    without = fit(steps[~steps["arm"].isin(LAMBDA_ARMS)])
    pd.testing.assert_frame_equal(
        with_lambda[["path", "r2", "n_points"]], without[["path", "r2", "n_points"]]
    )
    summary = summarize(steps).set_index(["arm", "awareness"])
    assert summary.loc[("lambda_pos", 1.0), ["predicted_drift_wrong"]].isna().all()
    assert np.isfinite(summary.loc[("lambda_pos", 1.0), "measured_ratio_to_grpo"])


def test_fit_and_tables_are_tidy(run):
    steps, prompts, config, pool = run
    assert len(steps) == len(LENGTH_BIAS_DEFAULT) * 2 * len(config.seeds) * config.steps
    assert len(prompts) == len(LENGTH_BIAS_DEFAULT) * 2 * len(config.seeds) * config.n_prompts
    f = fit(steps).set_index("path")
    assert f.loc["wrong", "r2"] > 0.5  # 64 prompts x 2 seeds; the default run gets ~0.95
    assert f.loc["wrong", "blind_max_abs_z"] < 5
    curve = lb.closed_form_curve(pool, config, (0.0, 0.5, 1.0))
    g = curve[curve["arm"] == "grpo"]["predicted_drift_wrong"].to_numpy()
    assert g[0] == 0 and g[1] == pytest.approx(g[2] / 2)


def test_arms_share_prompts_and_first_step_draws(run):
    steps, prompts, _, _ = run
    p = prompts.pivot_table(index=["seed", "awareness", "prompt"], columns="arm", values="p")
    assert (p.nunique(axis=1) == 1).all()
    first = steps[steps["step"] == 0].pivot_table(
        index=["seed", "awareness"], columns="arm", values="realized_tail_wrong"
    )
    np.testing.assert_allclose(first["grpo"], first["nostd_sequence"])  # same first draws


@pytest.mark.parametrize(
    "kw,match",
    [
        ({"n_prompts": 30, "groups_per_batch": 16}, "multiple"),
        ({"awareness": (1.5,)}, "awareness"),
        ({"arms": ("grpo", "ppo")}, "arms"),
        ({"core_length": 0}, "core_length"),
        ({"initial_tail": 0}, "initial_tail"),
        ({"core_length": 600}, "max_length"),
        ({"group_size": 0}, "group_size"),
    ],
)
def test_bad_config_fails_with_one_line(kw, match):
    with pytest.raises(ValueError, match=match) as err:
        lb.LengthBiasConfig(**kw)
    assert "\n" not in str(err.value)


def test_stage_writes_every_table(tmp_path):
    from grpo_dial.passrates.tables import passrate_table, write_passrates
    from grpo_dial.stages.length_bias import length_bias

    k = np.random.default_rng(0).integers(1, 16, 40)
    table = tmp_path / "t.parquet"
    write_passrates(passrate_table([f"p{i}" for i in range(40)], "x", 16, k), table)
    out = {n: str(tmp_path / f"{n}.csv") for n in ("steps", "prompts", "summary", "fit", "curve")}
    params = dict(n_prompts=16, steps=2, seeds=[0], awareness=[0.0, 1.0], arms=["grpo", "dapo"],
                  awareness_grid=[0.0, 1.0], threads=1)  # fmt: skip
    length_bias({"table": str(table)}, out, params)
    assert set(pd.read_csv(out["summary"])["arm"]) == {"grpo", "dapo"}
    assert len(pd.read_csv(out["curve"])) == 4


def test_engine_arms_match_their_closed_forms():
    """OPO under the constant normalizer (length_drift's length-weighted baseline), the
    whitening over tokens of each batch (estimator_mass.whitened_tail_drift, its large-batch
    limit: a few % off at M = 16 groups) and RLOO (8/7 x the mean baseline's drift)."""
    pool = np.random.default_rng(5).beta(0.6, 0.6, 3000)
    arms = ("reinforce_pp_baseline", "reinforce_pp", "rloo", "nostd_sequence")
    config = lb.LengthBiasConfig(n_prompts=64, steps=8, seeds=(0, 1, 2), arms=arms)
    steps, _ = lb.simulate_length_bias(pool, config)
    opo = lb.LengthBiasConfig(n_prompts=32, steps=4, seeds=(0, 1), arms=("opo_constant",))
    steps = pd.concat([steps, lb.simulate_length_bias(pool, opo)[0]])  # its closed form is slow
    for arm, slack in (("opo_constant", 0.0), ("reinforce_pp_baseline", 0.05),
                       ("reinforce_pp", 0.05), ("rloo", 0.0)):  # fmt: skip
        s = steps[(steps["arm"] == arm) & (steps["awareness"] == 1)]
        for path in ("wrong", "correct"):
            diff = s[f"measured_drift_{path}"] - s[f"predicted_drift_{path}"]
            se = diff.std() / np.sqrt(len(s))
            pred = s[f"predicted_drift_{path}"].mean()
            assert abs(diff.mean()) < 4 * se + slack * abs(pred), (arm, path, diff.mean(), pred)
            if arm != "opo_constant":  # OPO's drift is ~2 se here (tested in tests/core)
                assert abs(pred) > 4 * se, (arm, path)  # the closed form is told apart from 0
        assert s["predicted_drift_wrong"].mean() > 0 > s["predicted_drift_correct"].mean()
    blind = steps[steps["awareness"] == 0].groupby("arm")["predicted_drift_wrong"]
    zero = ["opo_constant", "rloo", "reinforce_pp_baseline"]  # not REINFORCE++: no baseline
    assert blind.apply(lambda x: np.abs(x).max()).loc[zero].max() < 1e-15
    first = steps[(steps["step"] == 0) & (steps["awareness"] == 1)].set_index(["arm", "seed"])
    rloo, mean = (first.loc[a, "predicted_drift_wrong"] for a in ("rloo", "nostd_sequence"))
    np.testing.assert_allclose(rloo, 8 / 7 * mean)


def test_whitening_under_the_token_normalizer_gets_its_closed_form(monkeypatch):
    """REINFORCE++ (baseline) under DAPO's token mean, verl's default loss: the prediction is
    estimator_mass.whitened_tail_drift's leading 1/M term at M = groups_per_batch over each
    (seed, awareness) block, not NaN (the refusal before it was derived) and not 0."""
    monkeypatch.setitem(
        ANALYSIS_ARMS, "reinforce_pp_baseline",
        {"preset": "reinforce_pp_baseline", "length_norm": "token"},
    )  # fmt: skip
    pool = np.random.default_rng(3).beta(0.6, 0.6, 2000)
    config = lb.LengthBiasConfig(n_prompts=32, steps=2, seeds=(0, 1), groups_per_batch=8,
                                 arms=("reinforce_pp_baseline",))  # fmt: skip
    assert lb.arm_dial("reinforce_pp_baseline", config).length_norm == "token"
    steps, prompts = lb.simulate_length_bias(pool, config)
    first = steps[steps["step"] == 0].set_index(["seed", "awareness"])
    for (s, aw), block in prompts.groupby(["seed", "awareness"]):  # step 0: tails 4, q = 0.8
        d = whitened_tail_drift(block["p"].to_numpy(), 0.8, 0.8, 12, 8, "token", aw, n_groups=8)
        assert first.loc[(s, aw), "predicted_drift_wrong"] == pytest.approx(d.wrong.mean())
        assert first.loc[(s, aw), "predicted_drift_correct"] == pytest.approx(d.correct.mean())
    aware = first.xs(1.0, level="awareness")
    assert (aware["predicted_drift_wrong"] > 0).all()
    assert (aware["predicted_drift_correct"] < 0).all()

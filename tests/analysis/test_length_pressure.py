"""Tests for grpo_dial.analysis.length_bias.pressure: a loop reference, the zero cases, blindness,
recomputed advantages, bad input, the per-dial summary and the inflation check."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from grpo_dial.analysis.length_bias import pressure as lp
from grpo_dial.core.dial import read_arm


def _responses(n_steps=40, groups=6, g=8, aware=0.0, seed=0):
    """Synthetic logged steps: lengths longer on wrong answers by `aware` x 10 tokens."""
    rng = np.random.default_rng(seed)
    rows = []
    for step in range(n_steps):
        for grp in range(groups):
            r = (rng.random(g) < 0.5).astype(float)
            adv = r - r.mean()
            sd = r.std()
            adv = adv / sd if sd > 0 else adv * 0
            tokens = 10 + rng.geometric(0.2, g) + np.where(r == 0, aware * 10, 0).astype(int)
            rows += [
                dict(
                    step=step,
                    group=grp,
                    reward=r[i],
                    advantage=adv[i],
                    tokens=int(tokens[i]),
                    length=int(tokens[i]) - 1,
                )
                for i in range(g)
            ]
    return pd.DataFrame(rows)


def _lambda_f(s, lam, r):
    """lambda-GRPO's f_i from its formula, one group at a time (softmax of h^lambda, times G)."""
    f = pd.Series(0.0, index=s.index)
    for _, g in s.groupby("group"):
        n = g["tokens"].astype(float)
        sd = n.std(ddof=0)
        z = (n - n.mean()) / sd if sd > 0 else 0 * n
        e = np.exp(np.maximum(1 + r * z, 1e-3) ** lam)
        f[g.index] = len(g) * e / e.sum()
    return f


def _trainer_weights(tokens: pd.Series, rows: int) -> pd.Series:
    """Each response's per-token weight from the trainer's own bnpo_weights on a (B, T) mask."""
    import torch

    from grpo_dial.core.token_weights import bnpo_weights

    n = torch.tensor(tokens.to_numpy())
    mask = torch.arange(int(n.max()))[None, :] < n[:, None]
    return pd.Series(bnpo_weights(mask, rows)[:, 0].numpy(), index=tokens.index)


def _loop(df, normalizer, max_length=64, lam=0.7, r=0.25, rows=5):
    """Reference: the docstring's formula with explicit loops over steps and responses."""
    out = {}
    for step, s in df.groupby("step"):
        b, total = len(s), s["tokens"].sum()
        if normalizer == "bnpo":
            w = _trainer_weights(s["tokens"], rows)
        elif normalizer == "sequence_sum":
            w = 1 / b + 0 * s["tokens"]
        elif normalizer == "sum":
            w = 1 + 0 * s["tokens"]
        elif normalizer == "sequence":
            w = 1 / (b * s["tokens"])
        elif normalizer == "token":
            w = 1 / total + 0 * s["tokens"]
        elif normalizer == "constant":
            w = 1 / (b * max_length) + 0 * s["tokens"]
        else:
            w = _lambda_f(s, lam, r) / total
        wbar = w.mean()
        lbar = s.groupby("group")["tokens"].transform("mean")
        scale = s["advantage"].abs().sum()
        pw = pc = 0.0
        for i in s.index:
            push = s.at[i, "advantage"] * (w[i] / wbar - 1) * (s.at[i, "tokens"] - lbar[i])
            if s.at[i, "advantage"] < 0:
                pw += push
            elif s.at[i, "advantage"] > 0:
                pc += push
        out[step] = (pw / scale if scale else 0.0, pc / scale if scale else 0.0)
    return out


@pytest.mark.parametrize("normalizer", lp.NORMALIZERS)
def test_matches_the_loop_reference(normalizer):
    df = _responses(n_steps=5, aware=0.5)
    got = lp.step_pressure(df, normalizer, 64, lam=0.7, rows=5).set_index("step")
    for step, (pw, pc) in _loop(df, normalizer).items():
        assert got.loc[step, "pressure_wrong"] == pytest.approx(pw, abs=1e-12)
        assert got.loc[step, "pressure_correct"] == pytest.approx(pc, abs=1e-12)


def test_lambda_pressure_follows_the_step_lambda_and_is_the_token_means_at_zero():
    df = _responses(n_steps=4, aware=0.5)
    zero = lp.step_pressure(df, "lambda", lam=0.0)
    assert (zero["pressure_wrong"] == 0).all()  # f = 1: the token mean's equal weights
    per_step = pd.Series({0: 0.0, 1: 0.7, 2: -0.7, 3: 0.7})  # steps 0..3
    got = lp.step_pressure(df, "lambda", lam=per_step).set_index("step")
    ref = lp.step_pressure(df, "lambda", lam=0.7).set_index("step")
    assert got.loc[1, "pressure_wrong"] == ref.loc[1, "pressure_wrong"] != 0
    assert got.loc[0, "pressure_wrong"] == 0
    with pytest.raises(ValueError, match="lambda is missing"):
        lp.step_pressure(df, "lambda", lam=per_step.drop(3))


@pytest.mark.parametrize("normalizer", ["constant", "token", "sequence_sum", "sum"])
def test_constant_and_batch_token_mean_have_exactly_zero_pressure(normalizer):
    out = lp.step_pressure(_responses(aware=1.0), normalizer, 64)
    assert (out["pressure_wrong"] == 0).all() and (out["pressure_net"] == 0).all()


def test_sequence_pushes_long_wrong_answers_and_blind_nets_to_zero():
    blind = lp.step_pressure(_responses(n_steps=300, aware=0.0), "sequence")
    assert (blind["pressure_wrong"] > 0).mean() > 0.95
    assert (blind["pressure_correct"] < 0).mean() > 0.95
    se = blind["pressure_net"].std() / np.sqrt(len(blind))
    assert abs(blind["pressure_net"].mean()) < 4 * se
    assert blind["pressure_wrong"].mean() > 10 * se  # the check has power


def test_dropped_rows_are_out_of_the_loss_but_in_the_lengths():
    df = _responses(n_steps=3)
    df["trained"] = df["group"] != 0
    out = lp.step_pressure(df, "sequence")
    ref = lp.step_pressure(df[df["trained"]].drop(columns="trained"), "sequence")
    np.testing.assert_allclose(out["pressure_wrong"], ref["pressure_wrong"])
    assert (out["n"] == 40).all()


def test_silent_step_has_zero_pressure():
    df = _responses(n_steps=2).assign(advantage=0.0)
    out = lp.step_pressure(df, "sequence")
    assert (out["pressure_wrong"] == 0).all()


def test_missing_advantages_are_recomputed_and_labelled():
    df = _responses(n_steps=3)
    logged, source = lp.with_advantages(df)
    assert source == "logged" and logged is df
    redone, source = lp.with_advantages(df.assign(advantage=np.nan))
    assert source.startswith("recomputed")
    # sample std: the logged population-std advantages shrink by sqrt((G-1)/G)
    nz = df["advantage"] != 0
    ratio = redone.loc[nz, "advantage"] / df.loc[nz, "advantage"]
    np.testing.assert_allclose(ratio, np.sqrt(7 / 8), rtol=1e-3)


def test_bad_input_fails_with_one_line():
    df = _responses(n_steps=1)
    with pytest.raises(ValueError, match="normalizer"):
        lp.step_pressure(df, "tokens")
    with pytest.raises(ValueError, match="advantage"):
        lp.step_pressure(df.drop(columns="advantage"), "sequence")
    with pytest.raises(ValueError, match="not logged"):
        lp.step_pressure(df.assign(advantage=np.nan), "sequence")
    with pytest.raises(ValueError, match="tokens"):
        lp.step_pressure(df.drop(columns=["tokens", "length"]), "sequence")


def test_summaries_and_the_inflation_check():
    runs = pd.DataFrame(
        {
            "dial": ["grpo"] * 3 + ["dr_grpo"] * 3,
            "seed": [0, 1, 2] * 2,
            "normalizer": ["sequence"] * 3 + ["constant"] * 3,
            "pressure_wrong": [0.5, 0.6, 0.55, 0, 0, 0],
            "pressure_correct": [-0.5] * 3 + [0] * 3,
            "pressure_net": [0.0] * 6,
            "wrong_length_change": [6.0, 7.0, 8.0, 1.0, 2.0, 0.0],
            "correct_length_change": [0.0] * 6,
        }
    )
    s = lp.dial_summary(runs).set_index("dial")
    assert s.loc["grpo", "wrong_length_change"] == pytest.approx(7.0)
    assert s.loc["grpo", "wrong_length_change_lo"] < 7 < s.loc["grpo", "wrong_length_change_hi"]
    pred = lp.predicts_inflation(runs)
    assert pred["inflation_gap"] == pytest.approx(6.0)
    assert pred["spearman_rho"] > 0.5
    steps = lp.step_pressure(_responses(n_steps=20, aware=1.0), "sequence")
    summary = lp.run_summary(steps, 0.1)
    assert summary["pressure_wrong"] > 0 and np.isfinite(summary["wrong_length_change"])


def test_stage_on_external_run_marks_its_normalizer(tmp_path):
    from grpo_dial.stages.length_bias import length_pressure_external

    path = tmp_path / "responses.parquet"
    _responses(n_steps=3).assign(advantage=np.nan).to_parquet(path)
    out = str(tmp_path / "lp.csv")
    length_pressure_external(
        {"responses": str(path)}, {"steps": out}, {"name": "x", "normalizer": "token"}
    )
    df = pd.read_csv(out)
    assert set(df["normalizer"]) == set(lp.IMPORTED)
    assert df.loc[df["used"], "normalizer"].unique().tolist() == ["token"]
    assert df["advantage_source"].str.startswith("recomputed").all()


def test_stage_on_own_runs_uses_the_decomposition_as_inflation(tmp_path):
    from grpo_dial.stages.length_bias import length_pressure

    responses, terms, runs = [], [], [["grpo", 0], ["dr_grpo", 0], ["grpo", 1]]
    for i, (dial, seed) in enumerate(runs):
        path = tmp_path / f"{dial}{seed}.parquet"
        _responses(n_steps=10, seed=i).to_parquet(path)
        responses.append(str(path))
        t = tmp_path / f"{dial}{seed}.csv"
        term = {"quantity": ["within_incorrect"], "kind": ["term"], "value": [i * i]}
        pd.DataFrame(term).to_csv(t)
        terms.append(str(t))
    out = {k: str(tmp_path / f"{k}.csv") for k in ("steps", "summary", "runs", "prediction")}
    params = {
        "runs": runs,
        "dials": {  # the fields read_arm resolves at DAG build (common.smk's DIAL_FIELDS)
            name: read_arm({"preset": name}, max_new_tokens=64).dial.as_dict()
            for name in ("grpo", "dr_grpo")
        },
        "window_fraction": 0.1,
    }
    length_pressure({"responses": responses, "terms": terms}, out, params)
    per_run = pd.read_csv(out["runs"])
    assert per_run["within_incorrect"].tolist() == [0.0, 1.0, 4.0]
    assert (per_run.loc[per_run["dial"] == "dr_grpo", "pressure_wrong"] == 0).all()
    pred = pd.read_csv(out["prediction"]).iloc[0]
    assert pred["inflation"] == "within_incorrect"
    assert pred["inflation_gap"] == pytest.approx(1.0)  # (0 + 4)/2 with pressure - 1 without


def test_bnpo_micro_batches_push_like_their_own_token_means():
    """TRL's bnpo: a micro-batch of the whole step is the batch token mean (0); one row per
    micro-batch is 1/|o| per response, the sequence mean's pressure; 5 rows (48 = 9 x 5 + 3, a
    short last one) is neither (its value: test_matches_the_loop_reference, against the trainer's
    own bnpo_weights). A missing or bad rows is refused in one line."""
    df = _responses(n_steps=6, aware=1.0)
    whole = lp.step_pressure(df, "bnpo", rows=48)
    assert (whole["pressure_wrong"] == 0).all()
    one = lp.step_pressure(df, "bnpo", rows=1)
    seq = lp.step_pressure(df, "sequence")
    np.testing.assert_allclose(one["pressure_wrong"], seq["pressure_wrong"], rtol=1e-12)
    five = lp.step_pressure(df, "bnpo", rows=5)["pressure_wrong"]
    assert (five != 0).all() and not np.allclose(five, seq["pressure_wrong"])
    for rows in (None, 0, True, 2.0):
        with pytest.raises(ValueError) as err:
            lp.step_pressure(df, "bnpo", rows=rows)
        assert str(err.value) == (
            f"normalizer 'bnpo' needs micro-batch rows (integer >= 1), got {rows!r}"
        )


def test_step_lengths_by_reward_and_scale_free_advantages():
    """wrong_length / correct_length are each step's mean L of the r = 0 and r = 1 rows (by hand
    on a 2-step table), and the pressure does not change when every advantage is scaled by 0.01
    (P divides by sum |A|; make mutate: a floor of 1 on that sum survived)."""
    df = pd.DataFrame(
        {
            "step": [1, 1, 1, 1, 2, 2, 2, 2],
            "group": [0, 0, 0, 0, 0, 0, 0, 0],
            "reward": [1.0, 0.0, 0.0, 1.0, 0.0, 0.0, 1.0, 0.0],
            "advantage": [1.0, -1.0, -1.0, 1.0, -0.5, -0.5, 1.5, -0.5],
            "tokens": [4, 10, 6, 8, 12, 3, 5, 9],
        }
    )
    out = lp.step_pressure(df, "sequence").set_index("step")
    assert list(out["wrong_length"]) == [8.0, 8.0]  # (10 + 6) / 2, (12 + 3 + 9) / 3
    assert list(out["correct_length"]) == [6.0, 5.0]  # (4 + 8) / 2, 5
    small = lp.step_pressure(df.assign(advantage=df["advantage"] * 0.01), "sequence")
    np.testing.assert_allclose(small["pressure_wrong"], out["pressure_wrong"], rtol=1e-12)
    assert (out["pressure_wrong"] != 0).all()

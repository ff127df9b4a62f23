"""grpo_dial.train.estimator and the three newer presets in a run: the strata, the difficulty
anchor and the learnable lambda the trainer gathers, each against a loop over the batch; the
steps table's lambda / anchor / strata columns and the responses' advantages recomputed from
the tables; an interrupted run resumed from its checkpoint equals the uninterrupted one."""

from __future__ import annotations

import math
import statistics
from dataclasses import replace
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
import torch
from _rl_fixtures import FakeTask, one_thread, tiny_policy  # noqa: F401

from grpo_dial.core.advantage import advantages
from grpo_dial.core.dial import Dial, preset
from grpo_dial.core.difficulty_anchor import START, AnchorState, anchor_update
from grpo_dial.data.tasks import ArithmeticTask
from grpo_dial.train import checkpoint, estimator
from grpo_dial.train.config import TrainConfig
from grpo_dial.train.loop import train_run
from grpo_dial.train.step import make_optimizer, policy_update, sample_batch, sampling_rngs

CFG = TrainConfig(
    steps=4, prompts_per_step=3, group_size=4, max_new_tokens=8, train_pool=20,
    heldout_prompts=6, eval_every=2, checkpoint_every=2, identity_every=2, identity_groups=2,
    progress=False,
)  # fmt: skip
TABLES = ("steps", "responses")
PRESETS = ("lambda_grpo", "stratified_grpo", "hadw_grpo")


class FirstChar(FakeTask):
    """The fake task with a task stratum: 1 + the alphabet index of the first character."""

    stratum_keys = ("first_char",)

    def stratum(self, problem, response, key):
        assert key == "first_char"
        return 1 + "abc".find(response[:1]) if response else 0


def _batch(dial=None, task=None, config=CFG, seed=3):
    model, tokenizer = tiny_policy(seed=seed)
    task = task or FakeTask()
    pool = task.problems("train", config.train_pool, config.pool_seed)
    rng, gen = sampling_rngs(config)
    return sample_batch(model, tokenizer, task, pool, dial or Dial(), config, rng, gen)


def _run(base_dir, tmp, dial, config=CFG, **kw):
    outputs = {name: tmp / f"{name}.parquet" for name in TABLES}
    train_run(base_dir, FakeTask(), dial, config, outputs, tmp / "ckpt", **kw)
    return {name: pd.read_parquet(path) for name, path in outputs.items()}


# --------------------------------------------------------------------------- strata


def test_strata_of_truncated_and_length_bucket():
    batch = _batch(config=replace(CFG, prompts_per_step=6))
    task = FakeTask()
    ro = batch.rollouts
    trunc = estimator.strata_of(batch, task, "truncated")
    want = [int(task.verify(p, t, f).truncated) for p, t, f in
            zip(ro.problems, ro.texts, ro.finished.tolist(), strict=True)]  # fmt: skip
    assert trunc.dtype == torch.long and trunc.tolist() == want
    assert set(want) == {0, 1}  # the case has both strata

    lengths = [sum(row) for row in ro.response_mask.tolist()]  # tokens, EOS included
    gids = batch.group_ids.tolist()
    mean_of = {g: statistics.fmean(n for n, h in zip(lengths, gids, strict=True) if h == g)
               for g in set(gids)}  # fmt: skip
    bucket = estimator.strata_of(batch, task, "length_bucket")
    assert bucket.tolist() == [int(n > mean_of[g]) for n, g in zip(lengths, gids, strict=True)]
    assert set(bucket.tolist()) == {0, 1}


def test_strata_of_a_task_key():
    task = FirstChar()
    batch = _batch(task=task)
    got = estimator.strata_of(batch, task, "first_char")
    want = [1 + "abc".find(t[:1]) if t else 0 for t in batch.rollouts.texts]
    assert got.dtype == torch.long and got.tolist() == want and len(set(want)) > 1
    with pytest.raises(ValueError, match="'check_lines' is not provided by task 'fake'") as err:
        estimator.strata_of(batch, task, "check_lines")
    assert "first_char" in str(err.value) and "\n" not in str(err.value)


def test_strata_of_the_arithmetic_tail():
    """'check_lines' counts the checks after the answer; the texts are demonstrations with a
    known number of checks, so the expected strata are the '&' counts."""
    task = ArithmeticTask(tail_checks=3)
    rng = np.random.default_rng(0)
    problems = [p for p in task.problems("train", 4, 0) for _ in range(3)]
    texts = [task.demonstration(p, "worked", rng) for p in problems]
    batch = SimpleNamespace(rollouts=SimpleNamespace(problems=problems, texts=texts))
    got = estimator.strata_of(batch, task, "check_lines")
    assert got.tolist() == [t.count("&") for t in texts] and len(set(got.tolist())) > 1


# --------------------------------------------------------------------------- anchor


def test_anchor_for_batch_and_prompt():
    batch = _batch()
    y = float(batch.rewards.double().mean())
    assert estimator.anchor_for(Dial(), START, batch, np.zeros(CFG.train_pool)) is None
    hadw = Dial(anchor="batch")
    assert estimator.anchor_for(hadw, START, batch, None) == pytest.approx(y, rel=1e-6)
    assert estimator.anchor_for(hadw, AnchorState(0.37, (0.2, 0.5)), batch, None) == 0.37

    # 'prompt': relabel the groups (descending, signed ids) and shuffle the rows, so the
    # sorted group order differs from the order of first appearance
    perm = torch.randperm(len(batch.rewards), generator=torch.Generator().manual_seed(0))
    shuffled = SimpleNamespace(
        rewards=batch.rewards[perm],
        group_ids=100 - 7 * batch.group_ids[perm],
        pool_index=batch.pool_index[perm.numpy()],
    )
    estimate = np.random.default_rng(1).random(CFG.train_pool)
    got = estimator.anchor_for(Dial(anchor="prompt"), START, shuffled, estimate)
    gids, pools = shuffled.group_ids.tolist(), shuffled.pool_index.tolist()
    pool_of = {}
    for g, j in zip(gids, pools, strict=True):
        assert pool_of.setdefault(g, j) == j  # one prompt per group
    want = [estimate[pool_of[g]] for g in sorted(pool_of)]
    assert got.dtype == torch.float64 and got.tolist() == want
    assert want != [estimate[pool_of[g]] for g in dict.fromkeys(gids)]  # order matters


def test_next_anchor_and_context():
    batch, task = _batch(), FakeTask()
    y = float(batch.rewards.mean())
    state = AnchorState(0.8, (0.8, 0.1))
    for form in ("paper", "released", "batch_std"):
        dial = Dial(anchor="batch", anchor_rate=0.5, anchor_update=form)
        after = estimator.next_anchor(dial, state, batch)
        assert after == anchor_update(state, y, 0.5, 8, form=form)
    for off in (Dial(), Dial(anchor="prompt")):
        assert estimator.next_anchor(off, state, batch) is state
    estimate = np.full(CFG.train_pool, 0.25)
    assert estimator.context(Dial(), batch, task, state, estimate) == {}
    both = estimator.context(
        Dial(strata="truncated", anchor="prompt"), batch, task, state, estimate
    )
    assert set(both) == {"strata", "anchor"}
    assert both["anchor"].tolist() == [0.25] * len(torch.unique(batch.group_ids))


def test_learnable_lambda_is_its_own_parameter_group():
    assert estimator.new_lambda(Dial(length_norm="lambda"), "cpu") is None
    dial = Dial(length_norm="lambda", lambda_learnable=True, lambda_value=0.3, lambda_lr=0.05)
    lam = estimator.new_lambda(dial, "cpu")
    assert isinstance(lam, torch.nn.Parameter) and float(lam.detach()) == pytest.approx(0.3)
    model, _ = tiny_policy()
    optimizer = make_optimizer(model, CFG)
    estimator.attach_lambda(optimizer, lam, dial)
    group = optimizer.param_groups[-1]
    assert group["params"] == [lam] and group["lr"] == 0.05 and group["weight_decay"] == 0.0
    assert len(optimizer.param_groups) == 2
    assert estimator.lambda_value(dial, lam) == pytest.approx(0.3)
    assert estimator.lambda_value(Dial(length_norm="lambda", lambda_value=0.7), None) == 0.7
    assert math.isnan(estimator.lambda_value(Dial(), None))


def _ref_dlambda_factors(lengths: list[int], ids: list[int], lam: float, r: float) -> list[float]:
    """d f_i / d lambda of lambda-GRPO's f = G softmax_group(h^lambda), h = max(1 + r z, 1e-3):
    G s_i (g_i' - sum_j s_j g_j'), g' = h^lambda log h (z: population-standardized length)."""
    out = [0.0] * len(lengths)
    for g in set(ids):
        members = [i for i, h in enumerate(ids) if h == g]
        n = [float(lengths[i]) for i in members]
        mu, sd = statistics.fmean(n), statistics.pstdev(n)
        h = [max(1 + r * ((x - mu) / sd if sd > 0 else 0.0), 1e-3) for x in n]
        e = [math.exp(hi**lam) for hi in h]
        s = [v / sum(e) for v in e]
        dg = [hi**lam * math.log(hi) for hi in h]
        mean_dg = sum(a * b for a, b in zip(s, dg, strict=True))
        for j, i in enumerate(members):
            out[i] = len(members) * s[j] * (dg[j] - mean_dg)
    return out


def test_policy_update_steps_lambda_by_its_gradient():
    """One SGD update at ratio 1 (l_it = -A_i), in buckets of 2 rows: lambda moves by
    -lambda_lr dJ/dlambda, J = sum_i f_i(lambda) (-A_i |o_i|) / sum |o|, from the loop."""
    dial = Dial(length_norm="lambda", lambda_learnable=True, lambda_value=0.5, lambda_lr=0.1)
    cfg = replace(CFG, optimizer="sgd", grad_clip=None, updates_per_batch=1, micro_batch=2,
                  prompts_per_step=5)  # fmt: skip
    model, tokenizer = tiny_policy(seed=3)
    batch = _batch(dial, config=cfg)
    adv = advantages(batch.rewards, batch.group_ids, dial)[batch.trained]
    train = batch.rollouts.select(batch.trained)
    lam = estimator.new_lambda(dial, "cpu")
    optimizer = make_optimizer(model, cfg)
    estimator.attach_lambda(optimizer, lam, dial)
    assert policy_update(model, optimizer, train, adv, dial, cfg, None, lam).finite
    lengths = [sum(row) for row in train.response_mask.tolist()]
    df = _ref_dlambda_factors(lengths, train.group_ids.tolist(), 0.5, dial.lambda_r)
    grad = sum(d * -a * n for d, a, n in zip(df, adv.tolist(), lengths, strict=True))
    grad /= sum(lengths)
    assert grad != 0
    assert float(lam.detach()) == pytest.approx(0.5 - dial.lambda_lr * grad, rel=1e-6)


# --------------------------------------------------------------------------- runs


@pytest.fixture(scope="module")
def runs(base_dir, tmp_path_factory):
    """The uninterrupted run of each preset: (tables, final checkpoint)."""
    out = {}
    for name in PRESETS:
        tmp = tmp_path_factory.mktemp(name)
        tables = _run(base_dir, tmp, preset(name))
        out[name] = tables, checkpoint.load_checkpoint(tmp / "ckpt" / checkpoint.FILENAME)
    return out


def _ref_group_adv(rewards: list[float]) -> list[float]:
    """GRPO's (r - mean) / (population std + 1e-6), 0 in a silent group."""
    if max(rewards) == min(rewards):
        return [0.0] * len(rewards)
    mu, sd = statistics.fmean(rewards), statistics.pstdev(rewards)
    return [(r - mu) / (sd + 1e-6) for r in rewards]


def _ref_anchor_paper(ys: list[float], rate: float, m: int) -> tuple[list[float], list[float]]:
    """(C_t^-, C_t^+) of arXiv 2601.08521 Eqs. 8-11: C_1^- = y_1, C_t^- = C_{t-1}^+; the running
    mean of the y's while t <= m, then C^+ = (1 - eta_t) C^- + eta_t y_t with eta_t = rate *
    pstdev of the previous m beliefs C^+."""
    before, beliefs = [], []
    for t, y in enumerate(ys, start=1):
        c = y if t == 1 else beliefs[-1]
        before.append(c)
        if t <= m:
            beliefs.append(statistics.fmean(ys[:t]))
        else:
            eta = rate * statistics.pstdev(beliefs[-m:])
            beliefs.append((1 - eta) * c + eta * y)
    return before, beliefs


def test_lambda_grpo_logs_a_moving_lambda(runs):
    (tables, state), dial = runs["lambda_grpo"], preset("lambda_grpo")
    lam = tables["steps"]["lambda"]
    assert np.isfinite(lam).all() and lam.iloc[0] == dial.lambda_value
    assert lam.nunique() == len(lam)  # moved at every step
    assert lam.diff().abs().iloc[1:].le(3 * dial.lambda_lr).all()  # AdamW: ~lr per update
    assert float(state["estimator"]["lambda"]) not in lam.tolist()  # after the last update
    assert tables["steps"][["anchor", "strata_cells", "strata_split_groups"]].isna().all().all()


def test_hadw_grpo_logs_the_anchor_and_weighs_by_it(runs):
    (tables, state), dial = runs["hadw_grpo"], preset("hadw_grpo")
    steps, resp = tables["steps"], tables["responses"]
    assert np.isfinite(steps["anchor"]).all() and steps["lambda"].isna().all()
    assert steps[["strata_cells", "strata_split_groups"]].isna().all().all()
    ys = resp.groupby("step")["reward"].mean().tolist()  # no refills: every response counts
    want, beliefs = _ref_anchor_paper(ys, dial.anchor_rate, dial.anchor_window)
    np.testing.assert_allclose(steps["anchor"], want, rtol=1e-6)
    assert steps["anchor"].nunique() > 1
    history = state["estimator"]["anchor"].tolist()[1:]
    np.testing.assert_allclose(history, beliefs[-dial.anchor_window :], rtol=1e-6)
    for (step, _), g in resp.groupby(["step", "group"]):
        r = g["reward"].tolist()
        c, p_hat = steps.set_index("step").loc[step, "anchor"], statistics.fmean(r)
        phi = [dial.anchor_scale * math.exp(-np.sign(a) * (p_hat - c)) for a in _ref_group_adv(r)]
        want = [a * f for a, f in zip(_ref_group_adv(r), phi, strict=True)]
        np.testing.assert_allclose(g["advantage"], want, rtol=1e-5, atol=1e-6)


def test_stratified_grpo_logs_its_cells_and_normalizes_within_them(runs):
    (tables, _), dial = runs["stratified_grpo"], preset("stratified_grpo")
    steps, resp = tables["steps"], tables["responses"]
    assert steps[["lambda", "anchor"]].isna().all().all()
    cells = resp.groupby("step").apply(lambda s: len(s.groupby(["group", "truncated"])))
    groups = resp.groupby("step")["group"].nunique()
    split = resp.groupby(["step", "group"])["truncated"].nunique().gt(1).groupby("step").sum()
    assert steps["strata_cells"].tolist() == cells.astype(float).tolist()
    assert (steps["strata_cells"] >= groups.to_numpy()).all()
    assert steps["strata_split_groups"].tolist() == split.astype(float).tolist()
    assert steps["strata_split_groups"].sum() > 0  # some groups are split: the case can fail
    beta = dial.strata_blend
    for _, g in resp.groupby(["step", "group"]):
        a_group = dict(zip(g.index, _ref_group_adv(g["reward"].tolist()), strict=True))
        want = []
        for i in g.index:
            cell = g[g["truncated"] == g.loc[i, "truncated"]]
            a_cell = dict(zip(cell.index, _ref_group_adv(cell["reward"].tolist()), strict=True))
            want.append(beta * a_cell[i] + (1 - beta) * a_group[i])
        np.testing.assert_allclose(g["advantage"], want, rtol=1e-5, atol=1e-6)


def test_checkpoint_keeps_only_what_the_dial_learns(runs):
    assert set(runs["lambda_grpo"][1]["estimator"]) == {"anchor", "lambda"}
    for name in ("stratified_grpo", "hadw_grpo"):
        assert set(runs[name][1]["estimator"]) == {"anchor"}


@pytest.mark.parametrize("name", ["lambda_grpo", "hadw_grpo"])
def test_resume_restores_lambda_and_anchor(runs, base_dir, tmp_path, name):
    """Interrupted after step 3 (checkpoint at 2) and run again: the steps and responses equal
    the uninterrupted run's, so lambda and the anchor came back from the checkpoint."""

    def interrupt(step):
        if step == 3:
            raise KeyboardInterrupt("killed after step 3")

    with pytest.raises(KeyboardInterrupt):
        _run(base_dir, tmp_path, preset(name), callback=interrupt)
    assert checkpoint.load_checkpoint(tmp_path / "ckpt" / checkpoint.FILENAME)["step"] == 2
    resumed = _run(base_dir, tmp_path, preset(name))
    full = runs[name][0]
    for table in TABLES:
        a, b = full[table], resumed[table]
        if table == "steps":
            a, b = a.drop(columns="wall_seconds"), b.drop(columns="wall_seconds")
        pd.testing.assert_frame_equal(a, b, check_exact=True)


def test_a_stratum_the_task_lacks_stops_the_run_before_the_model_loads(base_dir, tmp_path):
    dial = preset("stratified_grpo").replace(strata="check_lines")
    with pytest.raises(ValueError, match="stratum key 'check_lines' is not provided") as err:
        _run(base_dir, tmp_path, dial)
    assert "\n" not in str(err.value)
    assert not (tmp_path / "ckpt").exists()  # nothing started

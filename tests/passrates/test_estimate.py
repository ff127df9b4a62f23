"""Pass-rate estimation: Wilson against scipy, and every column against a one-by-one reference."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch
from fake_task import CopyTask
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import binomtest

from grpo_dial.passrates.estimate import EXTRA_COLUMNS, estimate_pass_rates, wilson_interval
from grpo_dial.passrates.tables import PASSRATE_COLUMNS, validate_passrates
from grpo_dial.policy.model import PolicySpec, build_char_tokenizer, build_tiny_llama
from grpo_dial.policy.rollout import generate_groups
from grpo_dial.policy.warm_start import WarmStartConfig, warm_start

TASK = CopyTask()
SMALL = PolicySpec(n_layers=2, hidden_size=64, n_heads=2, intermediate_size=128)


class NoSplitTask(CopyTask):
    name = "copy-nosplit"

    def length_split(self, problem, response):
        return None


@settings(max_examples=80, deadline=None)
@given(st.integers(1, 200), st.data(), st.sampled_from([0.8, 0.9, 0.95, 0.99]))
def test_wilson_matches_scipy(n, data, confidence):
    k = data.draw(st.integers(0, n))
    lo, hi = wilson_interval(k, n, confidence)
    ref = binomtest(k, n).proportion_ci(confidence_level=confidence, method="wilson")
    assert np.isclose(lo, ref.low, atol=1e-12) and np.isclose(hi, ref.high, atol=1e-12)
    assert lo <= k / n <= hi


def test_wilson_vectorized_and_edges():
    k = np.arange(9)
    lo, hi = wilson_interval(k, 8)
    assert lo.shape == hi.shape == (9,)
    for i in range(9):
        assert (lo[i], hi[i]) == tuple(float(x) for x in wilson_interval(i, 8))
    assert lo[0] == 0.0 and hi[-1] == 1.0
    assert np.all(np.diff(lo) > 0) and np.all(np.diff(hi) > 0)
    assert np.allclose(lo + hi[::-1], 1.0)  # symmetric in k <-> n - k
    lo1, hi1 = wilson_interval([0, 1], [1, 1])  # singleton: n = 1
    assert lo1[0] == 0 and hi1[1] == 1 and 0 < hi1[0] < 1
    for bad in ((3, 2), (-1, 2), (0, 0)):
        with pytest.raises(ValueError, match="0 <= k <= n"):
            wilson_interval(*bad)
    with pytest.raises(ValueError, match="confidence"):
        wilson_interval(1, 2, confidence=1.0)


@pytest.fixture(scope="module")
def policy():
    tok = build_char_tokenizer(TASK.alphabet)
    model = build_tiny_llama(SMALL, tok, seed=0)
    cfg = WarmStartConfig(
        steps=60, batch_size=32, warmup_steps=10, corpus_size=2000, progress=False
    )
    warm_start(TASK, model, tok, cfg)  # partly trained: pass rates spread over (0, 1)
    return model, tok


def _problems():
    # train numbers are partly learned; eval numbers end in a digit never seen last: k = 0
    return TASK.problems("train", 20, 0) + TASK.problems("eval", 6, 0)


def _reference(model, tok, task, problems, n, max_new, seed, per_batch, temperature=1.0):
    """The same draws, verified and averaged one response at a time with plain loops."""
    gen = torch.Generator().manual_seed(seed)
    rows = []
    for lo in range(0, len(problems), per_batch):
        r = generate_groups(model, tok, problems[lo : lo + per_batch], n, max_new, temperature, gen)
        for j, prob in enumerate(problems[lo : lo + per_batch]):
            texts = r.texts[j * n : (j + 1) * n]
            fins = r.finished[j * n : (j + 1) * n].tolist()
            assert all(p is prob for p in r.problems[j * n : (j + 1) * n])
            verdicts = [task.verify(prob, t, f) for t, f in zip(texts, fins, strict=True)]
            good = [t for t, v in zip(texts, verdicts, strict=True) if v.correct]
            bad = [t for t, v in zip(texts, verdicts, strict=True) if not v.correct]

            def mean(xs):
                return float(np.mean(xs)) if xs else np.nan

            def split(ts, part, prob=prob):
                s = [task.length_split(prob, t) for t in ts]
                return mean([getattr(x, part) for x in s if x is not None])

            rows.append(
                {
                    "prompt_id": prob.prompt_id,
                    "k": len(good),
                    "mean_len_correct": mean([len(t) for t in good]),
                    "mean_len_incorrect": mean([len(t) for t in bad]),
                    "truncated_rate": sum(not f for f in fins) / n,
                    "mean_work_correct": split(good, "work"),
                    "mean_redundant_correct": split(good, "redundant"),
                    "mean_work_incorrect": split(bad, "work"),
                    "mean_redundant_incorrect": split(bad, "redundant"),
                }
            )
    return pd.DataFrame(rows)


def test_table_matches_one_by_one_verification(policy):
    model, tok = policy
    problems = _problems()
    table = estimate_pass_rates(
        model,
        tok,
        TASK,
        problems,
        n_samples=16,
        max_new_tokens=6,
        seed=3,
        prompts_per_batch=7,
        progress=False,
    )
    assert tuple(table.columns) == PASSRATE_COLUMNS + EXTRA_COLUMNS
    pd.testing.assert_frame_equal(validate_passrates(table), table)
    assert table["prompt_id"].tolist() == [p.prompt_id for p in problems]
    assert (table["source"] == "copy").all() and (table["n"] == 16).all()
    assert table["difficulty"].tolist() == [p.difficulty for p in problems]
    ref = _reference(model, tok, TASK, problems, 16, 6, seed=3, per_batch=7)
    assert table["k"].tolist() == ref["k"].tolist()
    for col in ref.columns[2:]:
        np.testing.assert_allclose(table[col], ref[col], rtol=1e-12, err_msg=col)
    k = table["k"].to_numpy()
    assert (k == 0).any() and ((k > 0) & (k < 16)).sum() >= 5  # spread, zero-variance rows too
    assert (table["wilson_lo"] <= table["p_hat"]).all()
    assert (table["p_hat"] <= table["wilson_hi"]).all()
    assert table["truncated_rate"].between(0, 1).all() and table["truncated_rate"].gt(0).any()
    # the same seed and batching reproduce the table exactly
    again = estimate_pass_rates(
        model,
        tok,
        TASK,
        problems,
        n_samples=16,
        max_new_tokens=6,
        seed=3,
        prompts_per_batch=7,
        progress=False,
    )
    pd.testing.assert_frame_equal(table, again)


def test_greedy_gives_unanimous_rows(policy):
    model, tok = policy
    table = estimate_pass_rates(
        model,
        tok,
        TASK,
        _problems(),
        n_samples=4,
        max_new_tokens=6,
        temperature=0.0,
        progress=False,
    )
    assert set(table["k"]) <= {0, 4}  # every sample identical: silent rows only
    assert (table["wilson_lo"][table["k"] == 4] > 0.4).all()


def test_singleton_samples_and_missing_length_split(policy):
    model, tok = policy
    table = estimate_pass_rates(
        model, tok, NoSplitTask(), _problems()[:5], n_samples=1, max_new_tokens=6, progress=False
    )
    assert (table["n"] == 1).all() and set(table["k"]) <= {0, 1}
    assert (table["source"] == "copy-nosplit").all()
    for col in (
        "mean_work_correct",
        "mean_redundant_correct",
        "mean_work_incorrect",
        "mean_redundant_incorrect",
    ):
        assert table[col].isna().all()


def test_bad_arguments(policy):
    model, tok = policy
    problems = _problems()
    with pytest.raises(ValueError, match="n_samples"):
        estimate_pass_rates(model, tok, TASK, problems, n_samples=0, progress=False)
    with pytest.raises(ValueError, match="duplicate prompt_id"):
        estimate_pass_rates(model, tok, TASK, problems[:2] * 2, progress=False)
    with pytest.raises(ValueError, match="at least one problem"):
        estimate_pass_rates(model, tok, TASK, [], progress=False)

"""Warm start: corpus and masking, the schedule by hand, determinism, and that it learns."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from fake_task import CopyTask

from grpo_dial.data.tasks.base import Problem
from grpo_dial.policy.model import PolicySpec, build_char_tokenizer, build_tiny_llama
from grpo_dial.policy.rollout import generate_groups
from grpo_dial.policy.warm_start import (
    IGNORE,
    WarmStartConfig,
    build_corpus,
    encode_examples,
    lr_at,
)
from grpo_dial.policy.warm_start import warm_start as run_warm_start

TASK = CopyTask()
SMALL = PolicySpec(n_layers=2, hidden_size=64, n_heads=2, intermediate_size=128)


@pytest.fixture(scope="module")
def tok():
    return build_char_tokenizer(TASK.alphabet)


def test_config_validation_and_normalized_weights():
    cfg = WarmStartConfig(style_weights={"terse": 1, "check": 3})
    assert cfg.style_weights == (("terse", 0.25), ("check", 0.75))
    assert WarmStartConfig(style_weights=[("a", 2.0)]).style_weights == (("a", 1.0),)
    for bad in ({"a": -1.0}, {"a": 0.0}, [("a", 1.0), ("a", 1.0)], [("a",)], {"a": math.nan}):
        with pytest.raises(ValueError, match="style"):
            WarmStartConfig(style_weights=bad)
    for kwargs in (
        {"steps": 0},
        {"batch_size": 1.5},
        {"lr": 0.0},
        {"weight_decay": -1},
        {"warmup_steps": -1},
        {"corpus_size": True},
        {"grad_clip": math.inf},
    ):
        with pytest.raises(ValueError, match=next(iter(kwargs))):
            WarmStartConfig(**kwargs)


def test_lr_schedule_by_hand():
    cfg = WarmStartConfig(steps=10, warmup_steps=4, lr=1.0)
    got = [lr_at(t, cfg) for t in range(10)]
    want = [0.25, 0.5, 0.75, 1.0] + [0.5 * (1 + math.cos(math.pi * j / 6)) for j in range(6)]
    assert np.allclose(got, want)
    assert lr_at(0, WarmStartConfig(steps=5, warmup_steps=0, lr=2.0)) == 2.0


def test_corpus_styles_follow_the_weights():
    cfg = WarmStartConfig(corpus_size=4000, style_weights={"terse": 1, "check": 3}, seed=2)
    corpus = build_corpus(TASK, cfg)
    assert len(corpus) == 4000
    share = (corpus["style"] == "check").mean()
    assert abs(share - 0.75) < 4 * math.sqrt(0.75 * 0.25 / 4000)
    check = corpus["style"] == "check"
    assert (corpus["demonstration"][check].str.len() == 5).all()
    assert (corpus["demonstration"][~check].str.len() == 2).all()
    only = build_corpus(TASK, WarmStartConfig(corpus_size=500, style_weights={"terse": 1}))
    assert set(only["style"]) == {"terse"}
    with pytest.raises(ValueError, match="valid: terse, check"):
        build_corpus(TASK, WarmStartConfig(style_weights={"poem": 1}))


def test_loss_only_on_response_and_eos(tok):
    ids, labels = encode_examples(tok, ["12=", "7="], ["12;12", "7"])
    bos, eos, pad = tok.bos_token_id, tok.eos_token_id, tok.pad_token_id
    enc = lambda s: tok(s, add_special_tokens=False)["input_ids"]  # noqa: E731
    row0 = [bos, *enc("12="), *enc("12;12"), eos]
    row1 = [bos, *enc("7="), *enc("7"), eos] + [pad] * 5
    assert ids.tolist() == [row0, row1]
    assert labels.tolist() == [
        [IGNORE] * 4 + row0[4:],
        [IGNORE] * 3 + [row1[3], eos] + [IGNORE] * 5,
    ]


def test_a_chat_template_encodes_the_prompt_as_rl_does(tok):
    from grpo_dial.data.prompting import encode_prompts

    chat = build_char_tokenizer(TASK.alphabet)
    chat.chat_template = (  # a template of the alphabet's characters: "+" user "=" assistant
        "{% for m in messages %}+{{ m['content'] }}{% endfor %}"
        "{% if add_generation_prompt %}={% endif %}"
    )
    ids, labels = encode_examples(chat, ["12", "7"], ["12;12", "7"])
    enc = lambda s: chat(s, add_special_tokens=False)["input_ids"]  # noqa: E731
    head = encode_prompts(chat, ["12", "7"])
    assert head == [enc("+12="), enc("+7=")]  # no bos: the template writes the turn
    eos = chat.eos_token_id
    row0, row1 = head[0] + enc("12;12") + [eos], head[1] + enc("7") + [eos]
    assert ids.tolist() == [row0, row1 + [chat.pad_token_id] * 5]
    assert labels.tolist()[1] == [IGNORE] * 3 + row1[3:] + [IGNORE] * 5


def _cfg(**kw):
    base = dict(
        steps=250, batch_size=32, lr=3e-3, warmup_steps=20, corpus_size=2000, progress=False
    )
    return WarmStartConfig(**{**base, **kw})


def test_warm_start_learns_the_task(tok):
    model = build_tiny_llama(SMALL, tok, seed=0)
    curve = run_warm_start(TASK, model, tok, _cfg())
    assert list(curve.columns) == ["step", "loss", "lr", "tokens", "seconds"]
    assert curve["step"].tolist() == list(range(250))
    assert (np.diff(curve["tokens"]) > 0).all() and (np.diff(curve["seconds"]) >= 0).all()
    first, last = curve["loss"].iloc[:10].mean(), curve["loss"].iloc[-20:].mean()
    assert first > 2.0 and last < 0.35  # floor: the terse/check choice is a coin flip
    assert model.training  # the previous mode is restored
    problems = TASK.problems("train", 70, 0)  # every training number once
    r = generate_groups(model, tok, problems, 1, 8, temperature=0.0)
    ok = [
        TASK.verify(p, t, f).correct
        for p, t, f in zip(r.problems, r.texts, r.finished.tolist(), strict=True)
    ]
    assert np.mean(ok) >= 0.9


def test_warm_start_is_deterministic(tok):
    runs = []
    for _ in range(2):
        model = build_tiny_llama(SMALL, tok, seed=1)
        curve = run_warm_start(TASK, model, tok, _cfg(steps=15, seed=4))
        runs.append((curve, model.state_dict()))
    (c1, s1), (c2, s2) = runs
    assert c1[["step", "loss", "lr", "tokens"]].equals(c2[["step", "loss", "lr", "tokens"]])
    assert all(torch.equal(s1[k], s2[k]) for k in s1)
    other = run_warm_start(TASK, build_tiny_llama(SMALL, tok, seed=1), tok, _cfg(steps=15, seed=5))
    assert not np.allclose(other["loss"], c1["loss"])


def test_corpus_from_a_task_that_draws_its_own():
    from grpo_dial.data.tasks import get_task

    task = get_task("arithmetic")
    corpus = build_corpus(task, WarmStartConfig(corpus_size=300, style_weights={"worked": 1}))
    assert len(corpus) == 300 and corpus["style"].isna().all()
    assert corpus["prompt_id"].duplicated().any()  # drawn with replacement
    for prompt, demo in zip(corpus["prompt"], corpus["demonstration"], strict=True):
        assert demo.count(";") == prompt.count("+")  # worked: one step per '+', no terse answers
        total = str(sum(int(x) for x in prompt[:-1].split("+")))
        assert task.verify(Problem("x", prompt, total, "d"), demo, True).correct
    with pytest.raises(ValueError, match="valid: terse, worked, rechecked"):
        build_corpus(task, WarmStartConfig(style_weights={"poem": 1}))


def _padded_reference(model, tok, config: WarmStartConfig) -> list[float]:
    """The plain loop: each step's whole batch in one forward padded to its longest example."""
    from grpo_dial.policy.warm_start import _batches

    corpus = build_corpus(TASK, config)
    ids, labels = encode_examples(tok, corpus["prompt"].tolist(), corpus["demonstration"])
    lengths = (labels != IGNORE).long().cumsum(1).argmax(1) + 1
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(
        [
            {"params": [p for p in params if p.dim() >= 2], "weight_decay": config.weight_decay},
            {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0},
        ],
        lr=config.lr,
    )
    batches = _batches(len(corpus), config.batch_size, np.random.default_rng([config.seed, 1]))
    losses = []
    model.train()
    for step in range(config.steps):
        idx = torch.tensor(next(batches))
        width = int(lengths[idx].max())
        x, y = ids[idx, :width], labels[idx, :width]
        attn = (torch.arange(width) < lengths[idx, None]).long()
        for group in opt.param_groups:
            group["lr"] = lr_at(step, config)
        logits = model(input_ids=x, attention_mask=attn).logits[:, :-1].float()
        loss = torch.nn.functional.cross_entropy(
            logits.flatten(0, 1), y[:, 1:].flatten(), ignore_index=IGNORE
        )
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, config.grad_clip)
        opt.step()
        losses.append(loss.item())
    return losses


def test_length_buckets_give_the_padded_batch_gradient(tok, monkeypatch):
    from grpo_dial.policy import warm_start as ws

    monkeypatch.setattr(ws, "OVERHEAD", 0)  # as many buckets as lengths: the most splitting
    config = _cfg(steps=6, seed=2)
    fast = build_tiny_llama(SMALL, tok, seed=3)
    curve = run_warm_start(TASK, fast, tok, config)
    plain = build_tiny_llama(SMALL, tok, seed=3)
    ref = _padded_reference(plain, tok, config)
    assert np.allclose(curve["loss"], ref, atol=1e-5)
    for (name, a), b in zip(fast.named_parameters(), plain.parameters(), strict=True):
        assert torch.allclose(a, b, atol=1e-5), name


def test_tail_corpus_is_blind_to_the_solution():
    """The study's corpus (arithmetic with tail_checks 2, no rechecked style): 0, 1 or 2 checks
    equally often, drawn independently of how long the solution before them is."""
    from scipy import stats

    from grpo_dial.data.tasks import ArithmeticTask
    from grpo_dial.data.tasks.arithmetic_tail import split_tail

    task = ArithmeticTask(operands=(2, 3), tail_checks=2)
    weights = {"terse": 0.5, "worked": 0.5, "rechecked": 0.0}
    corpus = build_corpus(task, WarmStartConfig(corpus_size=3000, style_weights=weights))
    parts = [split_tail(d) for d in corpus["demonstration"]]
    checks = np.array([tail.count("&") for _, tail in parts])  # (C,)
    worked = np.array([";" in solution for solution, _ in parts])  # (C,) terse or worked
    table = np.array([[np.sum((checks == j) & (worked == w)) for j in range(3)] for w in (0, 1)])
    assert stats.chisquare(table.sum(0)).pvalue > 1e-3
    assert stats.chi2_contingency(table).pvalue > 1e-3
    assert not any("chk" in d for d in corpus["demonstration"])

"""The TRL importer on the files a real GRPOTrainer(log_completions=True) run writes (trl from the
test extra; skipped without it), not only on fixtures in TRL's format."""

from __future__ import annotations

import pytest

from grpo_dial.external.diagnostics import silent_by_step
from grpo_dial.external.importers import import_run
from grpo_dial.policy.model import PolicySpec, build_char_tokenizer, build_tiny_llama

PROMPTS = [f"{a}+{b}=" for a, b in zip(range(3, 19), range(40, 24, -1), strict=True)]  # 16
PER_STEP = 4  # prompts per step; TRL's sampler draws distinct prompts within an epoch
G = 4
STEPS = 2


def _parity(completions, **_):
    """1 when the completion has an odd number of characters: a mix of right and wrong."""
    return [float(len(c) % 2) for c in completions]


@pytest.fixture(scope="module")
def trl_run(tmp_path_factory):
    trl = pytest.importorskip("trl")
    from datasets import Dataset

    out = tmp_path_factory.mktemp("trl_run")
    tokenizer = build_char_tokenizer("0123456789+=#;")
    model = build_tiny_llama(
        PolicySpec(n_layers=1, hidden_size=16, n_heads=2, intermediate_size=32), tokenizer, seed=0
    )
    args = trl.GRPOConfig(
        output_dir=str(out), per_device_train_batch_size=PER_STEP * G, num_generations=G,
        max_completion_length=6, beta=0.0, bf16=False, fp16=False, gradient_checkpointing=False,
        max_steps=STEPS, logging_steps=1, save_strategy="no", report_to="none", use_cpu=True,
        log_completions=True, disable_tqdm=True, seed=0,
    )  # fmt: skip
    trainer = trl.GRPOTrainer(
        model=model, reward_funcs=_parity, args=args, processing_class=tokenizer,
        train_dataset=Dataset.from_dict({"prompt": PROMPTS}),
    )  # fmt: skip
    trainer.train()
    return out


def test_import_of_a_real_trl_run(trl_run):
    files = sorted((trl_run / "completions").glob("completions_*.parquet"))
    assert [f.name for f in files] == [f"completions_{s:05d}.parquet" for s in (1, 2)]
    rows, report = import_run({"format": "trl", "path": str(trl_run)})
    assert sorted(rows["step"].unique()) == [1, 2]
    per_step = rows.groupby("step").size()
    assert per_step.eq(PER_STEP * G).all(), per_step
    # groups are the G completions of one prompt within a step
    sizes = rows.groupby(["step", "prompt_id"]).size()
    assert sizes.eq(G).all() and len(sizes) == STEPS * PER_STEP
    # correctness comes from the only reward column, named after the reward function
    expected = rows["response"].str.len() % 2 == 1
    assert (rows["correct"].astype(bool) == expected).all()
    assert report.skipped == {} and report.rows_kept == STEPS * PER_STEP * G


def test_silent_groups_of_a_real_trl_run(trl_run):
    rows, _ = import_run({"format": "trl", "path": str(trl_run)})
    silent = silent_by_step(rows)
    assert silent["step"].tolist() == [1, 2] and silent["n_groups"].eq(PER_STEP).all()
    k = rows.groupby(["step", "prompt_id"])["correct"].sum()
    measured = ((k == 0) | (k == G)).groupby("step").mean()
    assert silent.set_index("step")["silent_fraction"].tolist() == pytest.approx(measured.tolist())

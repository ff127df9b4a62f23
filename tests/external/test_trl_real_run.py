"""The TRL importer and `grpo-dial diagnose` on the files a real GRPOTrainer(log_completions=True)
run writes (trl from the test extra; skipped without it): num_iterations=2 and logging_steps=1
(every file after a generation step repeats it), evaluation every 2 steps (its rows overwrite
that step's file), a dataset that holds one problem twice (two groups of one prompt per step),
two weighted reward functions. Checked against what the trainer itself generated, recorded by
the reward functions, and against its own logged mean reward."""

from __future__ import annotations

import shutil

import pytest

from grpo_dial.external.diagnostics import group_checks
from grpo_dial.external.importers import import_run
from grpo_dial.policy.model import PolicySpec, build_char_tokenizer, build_tiny_llama
from grpo_dial.tools.cli import main

G = 4
TRAIN = ["1+2=", "1+2=", "3+4=", "5+6="]  # one problem twice; every step sees the whole set
EVAL = ["7+8=", "9+1="]
STEPS = 6
WEIGHTS = [1.0, 0.5]


def _train(out, eval_steps: int) -> dict:
    trl = pytest.importorskip("trl")
    from datasets import Dataset

    tokenizer = build_char_tokenizer("0123456789+=#;")
    model = build_tiny_llama(
        PolicySpec(n_layers=1, hidden_size=16, n_heads=2, intermediate_size=32), tokenizer, seed=0
    )
    calls = []  # what the trainer generated: (training?, global step, prompts, completions)

    def parity(prompts, completions, **_):
        """1 when the completion has an odd number of characters: a mix of right and wrong."""
        calls.append((trainer.model.training, trainer.state.global_step, prompts, completions))
        return [float(len(c) % 2) for c in completions]

    def short(completions, **_):
        return [float(len(c) <= 3) for c in completions]

    args = trl.GRPOConfig(
        output_dir=str(out), per_device_train_batch_size=len(TRAIN) * G, num_generations=G,
        max_completion_length=6, beta=0.0, bf16=False, fp16=False, gradient_checkpointing=False,
        max_steps=STEPS, logging_steps=1, save_strategy="no", report_to="none", use_cpu=True,
        log_completions=True, disable_tqdm=True, seed=0, num_iterations=2,
        eval_strategy="steps", eval_steps=eval_steps, per_device_eval_batch_size=len(EVAL) * G,
        reward_weights=WEIGHTS,
    )  # fmt: skip
    trainer = trl.GRPOTrainer(
        model=model, reward_funcs=[parity, short], args=args, processing_class=tokenizer,
        train_dataset=Dataset.from_dict({"prompt": TRAIN}),
        eval_dataset=Dataset.from_dict({"prompt": EVAL}),
    )  # fmt: skip
    trainer.train()
    trainer.save_state()  # trainer_state.json, as HF scripts do (and every checkpoint holds)
    train = [c for c in calls if c[0]]
    return {
        "dir": out,
        "train": train,
        "eval_rows": sum(len(c[2]) for c in calls if not c[0]),
        "history": trainer.state.log_history,
        "global_step": trainer.state.global_step,
    }


@pytest.fixture(scope="module")
def trl_run(tmp_path_factory):
    """Evaluation every 2 steps: never on a generation step (1, 3, 5)."""
    return _train(tmp_path_factory.mktemp("trl_run"), eval_steps=2)


SPEC = {"format": "trl", "reward_column": "parity"}
WEIGHTED = {"reward_column": ["parity", "short"], "reward_weights": WEIGHTS, "threshold": 0.5}


def _import(path, **extra):
    return import_run({**SPEC, "path": str(path), **extra})


def test_import_keeps_exactly_the_training_generations(trl_run):
    files = sorted((trl_run["dir"] / "completions").glob("completions_*.parquet"))
    assert len(files) == STEPS == trl_run["global_step"]  # one file per log() step
    rows, report = _import(trl_run["dir"])
    # the trainer generated at global steps 0, 2, 4, logged after steps 1, 3, 5
    gen_steps = [step + 1 for _, step, _, _ in trl_run["train"]]
    assert gen_steps == [1, 3, 5] and sorted(rows["step"].unique()) == gen_steps
    got = sorted(zip(rows["step"], rows["prompt"], rows["response"], strict=True))
    want = sorted(
        (s + 1, p, c) for _, s, ps, cs in trl_run["train"] for p, c in zip(ps, cs, strict=True)
    )
    assert got == want
    n_train = len(want)
    assert report.skipped["eval"] == trl_run["eval_rows"] == 3 * len(EVAL) * G
    assert report.skipped["repeated"] == report.rows_read - n_train - trl_run["eval_rows"] > 0
    assert "from trainer_state.json" in str(report)


def test_eval_rows_are_found_without_trainer_state_too(trl_run, tmp_path):
    bare = tmp_path / "bare"
    shutil.copytree(trl_run["dir"] / "completions", bare / "completions")
    with_state, _ = _import(trl_run["dir"])
    for extra in ({}, {"eval_steps": 2}):  # inferred from the files, or GRPOConfig.eval_steps
        rows, report = _import(bare, **extra)
        assert report.skipped["eval"] == trl_run["eval_rows"]
        cols = ["step", "prompt", "response"]
        assert rows[cols].equals(with_state[cols])


def test_a_problem_twice_in_a_step_makes_two_groups_of_G(trl_run):
    rows, _ = _import(trl_run["dir"])
    sizes = rows.groupby(["step", "group"]).size()
    assert sizes.eq(G).all() and len(sizes) == sum(len(c[2]) for c in trl_run["train"]) // G
    twice = rows[rows["prompt"] == TRAIN[0]].groupby("step")["group"].nunique()
    assert twice.eq(2).all()
    checks = group_checks(rows)
    assert checks | {"expected_silent_groups": 0.0, "p_no_silent_groups": 0.0} == {
        "groups": 12.0, "group_size": 4.0, "unequal_groups": 0.0, "damaged_groups": 0.0,
        "group_size_uncertain": 0.0, "all_groups_informative": 0.0, "filtered": 0.0,
        "expected_silent_groups": 0.0, "p_no_silent_groups": 0.0}  # fmt: skip


def test_weighted_reward_matches_the_trainers_logged_reward(trl_run):
    rows, _ = _import(trl_run["dir"], **WEIGHTED)
    logged = {h["step"]: h["reward"] for h in trl_run["history"] if "reward" in h}
    mean = rows.groupby("step")["raw_reward"].mean()
    assert mean.to_dict() == pytest.approx({s: logged[s] for s in mean.index})
    assert (rows["correct"] == (rows["response"].str.len() % 2 == 1)).all()  # 0.5 * short < 0.5


def test_diagnose_reports_the_trainers_steps_and_groups_and_flags_eval_and_repeats(
    trl_run, tmp_path, capsys
):
    out = tmp_path / "diag"
    argv = ["diagnose", str(trl_run["dir"]), "--format", "trl", "--reward-column", "parity",
            "--n-boot", "20", "--out", str(out)]  # fmt: skip
    assert main(argv) == 0
    printed = capsys.readouterr().out
    values = dict(line.split()[:2] for line in printed.splitlines() if len(line.split()) == 2)
    n_groups = sum(len(c[2]) for c in trl_run["train"]) // G
    assert float(values["steps"]) == len(trl_run["train"]) == 3
    assert float(values["groups"]) == n_groups == 12
    assert float(values["unequal_groups"]) == 0
    assert f"eval: {trl_run['eval_rows']}" in printed and "repeated: " in printed
    assert (out / "diagnosis.png").exists()
    assert not (trl_run["dir"] / "grpo-dial").exists()


def test_an_evaluation_on_a_generation_step_keeps_the_tail_of_its_batch(tmp_path):
    """eval_steps=3: the evaluation's log() at step 3 overwrites that step's file, which then
    holds the last 8 rows of generation 2 and the 8 eval rows; the first 8 are lost."""
    run = _train(tmp_path / "run", eval_steps=3)
    rows, report = _import(run["dir"])
    gens = {s + 1: list(zip(ps, cs, strict=True)) for _, s, ps, cs in run["train"]}
    n_eval = len(EVAL) * G
    assert sorted(gens) == [1, 3, 5] and run["eval_rows"] == 2 * n_eval
    kept = {s: list(zip(g["prompt"], g["response"], strict=True)) for s, g in rows.groupby("step")}
    assert kept == {1: gens[1], 3: gens[3][n_eval:], 5: gens[5]}
    assert report.skipped["eval"] == run["eval_rows"]
    assert f"{n_eval} training row(s) overwritten" in str(report)

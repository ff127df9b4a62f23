"""The dial as TRL's GRPOConfig: what translates, and the one line for what does not."""

from __future__ import annotations

import pytest

from grpo_dial.backends.trl.config import (
    TRL_EPS,
    backend_error,
    grpo_config_kwargs,
    refusal,
)
from grpo_dial.core.dial import Dial, preset, read_arm

TRL_GRPO = {"preset": "grpo", "std_ddof": 1, "eps": 0.0001}
TRAIN = {"steps": 3, "prompts_per_step": 4, "group_size": 4, "max_new_tokens": 40,
         "lr": 1e-4, "seed": 7}  # fmt: skip


def arm_dial(arm: dict, max_new_tokens: int | None = None) -> Dial:
    return read_arm(arm, max_new_tokens=max_new_tokens).dial


def refused(arm: dict, backend: str = "trl") -> str | None:
    """backend_error of one arm `arm`, resolved as the DAG build resolves it."""
    resolved = {"arm": read_arm(arm, max_new_tokens=TRAIN["max_new_tokens"], backend=backend)}
    return backend_error(resolved, TRAIN["max_new_tokens"])


@pytest.mark.parametrize(
    ("arm", "scale", "loss"),
    [
        (TRL_GRPO, "group", "grpo"),
        ({"preset": "dr_grpo"}, "none", "dr_grpo"),  # std_ddof / eps do not enter A at power 0
        ({**TRL_GRPO, "length_norm": "token", "clip_high": 0.28}, "group", "dapo"),
    ],
)
def test_grpo_dr_grpo_and_dapo_translate(arm, scale, loss):
    assert refused(arm) is None
    kw = grpo_config_kwargs(arm_dial(arm, 40), TRAIN)
    assert (kw["scale_rewards"], kw["loss_type"]) == (scale, loss)
    assert kw["epsilon"] == 0.2 and kw["epsilon_high"] == arm.get("clip_high", 0.2)
    assert kw["num_generations"] == 4 and kw["max_completion_length"] == 40
    # one optimizer step per batch of prompts x G completions, as ours
    assert kw["per_device_train_batch_size"] * kw["gradient_accumulation_steps"] == 16
    assert kw["max_steps"] == 3 and kw["seed"] == 7 and kw["beta"] == 0.0


def test_a_micro_batch_splits_the_step_into_accumulation_steps():
    kw = grpo_config_kwargs(arm_dial(TRL_GRPO), {**TRAIN, "micro_batch": 6})
    assert (kw["per_device_train_batch_size"], kw["gradient_accumulation_steps"]) == (4, 4)
    assert kw["steps_per_generation"] == 4  # still one generation per optimizer step


@pytest.mark.parametrize(
    ("arm", "field", "names"),
    [
        ({"preset": "grpo"}, "std_ddof", "sample std"),  # ours: population std
        ({"preset": "grpo", "std_ddof": 1}, "eps", str(TRL_EPS)),
        ({**TRL_GRPO, "std_power": 0.5}, "std_power", "or not at all"),
        ({"preset": "dapo", "std_ddof": 1, "eps": 1e-4}, "silent", "dynamic-sampling"),
        ({**TRL_GRPO, "group_size": "adaptive"}, "group_size", "num_generations"),
        ({**TRL_GRPO, "length_norm": "lambda"}, "length_norm", "length-weighted"),
        ({**TRL_GRPO, "strata": "truncated"}, "strata", "whole groups"),
        ({**TRL_GRPO, "anchor": "batch"}, "anchor", "anchor"),
        ({"preset": "dr_grpo", "max_length": 30}, "max_length", "max_completion_length"),
        # the engines' estimators TRL's GRPOTrainer has not, each by its switch
        ({"preset": "rloo"}, "baseline", "group mean only"),
        ({"preset": "opo"}, "baseline", "group mean only"),
        ({"preset": "reinforce_pp"}, "baseline", "group mean only"),
        ({"preset": "gpg"}, "gpg_scale", "informative share"),
        ({"preset": "reinforce_pp_baseline"}, "whiten", "whiten"),
        ({**TRL_GRPO, "singleton": "reward"}, "singleton", "advantage 0"),
        ({**TRL_GRPO, "length_norm": "sum"}, "length_norm", "token-sum"),
        ({**TRL_GRPO, "empty_rows": "skip"}, "empty_rows", "every response in B"),
    ],
)
def test_a_field_trl_cannot_express_is_refused_in_one_line(arm, field, names):
    error = refused(arm)
    assert error is not None and "\n" not in error
    assert error.startswith(f"config error at 'dials.arm.{field}'") and names in error
    assert refused(arm, backend="own") is None  # ours trains every one


def test_processes_share_the_step_and_accumulate_their_micro_batches():
    train = {**TRAIN, "prompts_per_step": 64, "group_size": 8, "micro_batch": 8}
    kw = grpo_config_kwargs(arm_dial(TRL_GRPO), train, processes=8)  # 512 completions
    assert (kw["per_device_train_batch_size"], kw["gradient_accumulation_steps"]) == (8, 8)
    assert 8 * kw["per_device_train_batch_size"] * kw["steps_per_generation"] == 512
    with pytest.raises(ValueError, match="do not split evenly over 3 processes"):
        grpo_config_kwargs(arm_dial(TRL_GRPO), TRAIN, processes=3)


def test_the_arm_backend_overrides_the_train_section():
    arm = {"preset": "grpo", "backend": "trl"}  # population std: refused only on trl
    assert read_arm(arm, backend="own").backend == "trl"
    assert "std_ddof" in refused(arm, backend="own")
    assert read_arm({}).backend == "own"
    assert read_arm({}, backend="trl").backend == "trl"


def test_an_unknown_backend_is_named():
    with pytest.raises(ValueError, match="backend='verl' is not valid; choose one of 'own', 'trl'"):
        read_arm({**TRL_GRPO, "backend": "verl"})


def test_the_translation_refuses_what_the_dry_run_refuses():
    with pytest.raises(ValueError, match="std_ddof"):
        grpo_config_kwargs(preset("grpo"), TRAIN)
    assert refusal(Dial(std_power=0.0, std_ddof=0, eps=0.0), 40) is None


def test_trl_accepts_every_keyword():
    trl = pytest.importorskip("trl")
    for arm in (TRL_GRPO, {"preset": "dr_grpo"}, {**TRL_GRPO, "length_norm": "token"}):
        kw = grpo_config_kwargs(arm_dial(arm, 40), TRAIN)
        args = trl.GRPOConfig(output_dir="unused", use_cpu=True, report_to="none", **kw)
        assert args.scale_rewards == kw["scale_rewards"] and args.loss_type == kw["loss_type"]
        assert args.generation_batch_size == 16


@pytest.mark.parametrize(
    ("arm", "scale", "loss", "level"),
    [
        ({"preset": "batch_std"}, "batch", "grpo", "token"),  # TRL's scale_rewards='batch'
        ({**TRL_GRPO, "preset": "luspo"}, "group", "luspo", "sequence"),
        ({**TRL_GRPO, "preset": "gspo"}, "group", "grpo", "sequence"),
        ({"preset": "dr_grpo", "std_scope": "batch"}, "none", "dr_grpo", "token"),  # no std
    ],
)
def test_batch_std_luspo_and_gspo_translate(arm, scale, loss, level):
    assert refused(arm) is None
    kw = grpo_config_kwargs(arm_dial(arm, 40), TRAIN)
    assert (kw["scale_rewards"], kw["loss_type"], kw["importance_sampling_level"]) == (
        scale, loss, level)  # fmt: skip
    if arm.get("preset") == "gspo":
        assert (kw["epsilon"], kw["epsilon_high"]) == (3e-4, 4e-4)  # GSPO's range per level


def test_bnpo_sets_trls_micro_batch_to_its_rows():
    arm = {**TRL_GRPO, "length_norm": "bnpo", "bnpo_rows": 4}
    assert refused(arm) is None
    kw = grpo_config_kwargs(arm_dial(arm), {**TRAIN, "micro_batch": 8})
    assert kw["loss_type"] == "bnpo"
    assert (kw["per_device_train_batch_size"], kw["gradient_accumulation_steps"]) == (4, 4)
    with pytest.raises(ValueError, match="bnpo_rows = 5 does not divide each process's 16"):
        grpo_config_kwargs(arm_dial({**arm, "bnpo_rows": 5}), TRAIN)


def test_trl_accepts_the_engines_keywords():
    trl = pytest.importorskip("trl")
    arms = ({"preset": "batch_std"}, {**TRL_GRPO, "preset": "luspo"},
            {**TRL_GRPO, "length_norm": "bnpo", "bnpo_rows": 4})  # fmt: skip
    for arm in arms:
        kw = grpo_config_kwargs(arm_dial(arm, 40), TRAIN)
        args = trl.GRPOConfig(output_dir="unused", use_cpu=True, report_to="none", **kw)
        assert args.scale_rewards == kw["scale_rewards"] and args.loss_type == kw["loss_type"]
        assert args.importance_sampling_level == kw["importance_sampling_level"]


def test_in_process_training_is_the_own_trainers_alone():
    """backends.in_process: the own trainer's in-process cells for an own arm; any other backend
    refused in one line naming it."""
    from grpo_dial.backends import in_process, own_cells
    from grpo_dial.core.dial import read_arm

    assert in_process(read_arm({"preset": "grpo"})) is own_cells
    with pytest.raises(ValueError, match="^backend 'trl': the aware sweep's cells and probe"):
        in_process(read_arm({"preset": "grpo", "std_ddof": 1, "eps": 1e-4}, backend="trl"))

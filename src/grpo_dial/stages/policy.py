"""Entry points of the policy rules: warm start, pass-rate estimation, lr calibration, training.

Same contract as `grpo_dial.stages`: `stage(input, output, params)` with plain mappings, so each
runs from Snakemake (`stages.run_rule`), the CLI or a test. Torch is imported here, never in the
workflow's DAG-building code.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

import pandas as pd

from grpo_dial.data.sources import base_model_path
from grpo_dial.tables import read_table, write_table

log = logging.getLogger("grpo_dial")


def _prepare_job(params: Mapping) -> Mapping:
    """Pin torch to the job's threads so parallel jobs do not fight over the cores; a bare
    "cuda" device becomes a GPU claimed for this job (grpo_dial.policy.devices)."""
    import torch

    from grpo_dial.policy.devices import resolve_device

    if params.get("threads"):
        torch.set_num_threads(int(params["threads"]))
    if "device" in params:
        return {**params, "device": resolve_device(params["device"])}
    return params


def _task(params: Mapping):
    from grpo_dial.data.tasks import task_from_spec

    return task_from_spec(params["task"])


def warm_start(input: Mapping, output: Mapping, params: Mapping) -> None:
    """Warm-start the base policy on the task's demonstrations: the tiny char-level Llama for
    the task's alphabet, or (warm_start.pretrained, model.base not tiny) the pretrained model in
    float32 from its own weights and tokenizer."""
    from grpo_dial.policy.model import (
        PolicySpec,
        build_char_tokenizer,
        build_tiny_llama,
        load_policy,
        save_policy,
    )
    from grpo_dial.policy.warm_start import WarmStartConfig
    from grpo_dial.policy.warm_start import warm_start as run_warm_start

    params = _prepare_job(params)
    task = _task(params)
    settings = dict(params["warm_start"])
    if settings.pop("pretrained", False) and params.get("base", "tiny") != "tiny":
        source = str(input["pretrained"]) if input.get("pretrained") else str(params["base"])
        model, tokenizer = load_policy(source, device=params["device"], dtype="float32")
    else:
        tokenizer = build_char_tokenizer(task.alphabet)
        model = build_tiny_llama(PolicySpec(**params["spec"]), tokenizer,
                                 seed=params["model_seed"])  # fmt: skip
        model.to(params["device"])
    settings["style_weights"] = tuple(settings["style_weights"].items())
    curve = run_warm_start(task, model, tokenizer, WarmStartConfig(**settings))
    log.info("warm start: loss %.3f -> %.3f", curve["loss"].iloc[0], curve["loss"].iloc[-1])
    save_policy(model, tokenizer, output["model"])
    write_table(curve, output["loss"])


def estimate_pass_rates(input: Mapping, output: Mapping, params: Mapping) -> None:
    """Pass rates of the base policy on the task's training pool."""
    from grpo_dial.passrates.estimate import estimate_pass_rates as estimate
    from grpo_dial.passrates.tables import write_passrates
    from grpo_dial.policy.model import load_policy

    params = _prepare_job(params)
    task = _task(params)
    settings = params["pass_rates"]
    model, tokenizer = load_policy(
        base_model_path(input, params),
        device=params["device"],
        attn_implementation=params.get("attn_implementation", "sdpa"),
    )
    problems = task.problems("train", settings["pool"], settings["seed"])
    table = estimate(
        model,
        tokenizer,
        task,
        problems,
        n_samples=settings["samples"],
        max_new_tokens=settings["max_new_tokens"],
        temperature=settings["temperature"],
        seed=settings["seed"],
        prompts_per_batch=settings["prompts_per_batch"],
    )
    shares = {
        "p = 0": float((table["k"] == 0).mean()),
        "0 < p < 1": float(((table["k"] > 0) & (table["k"] < table["n"])).mean()),
        "p = 1": float((table["k"] == table["n"]).mean()),
    }
    log.info("base policy pass rates over %d prompts: %s", len(table), shares)
    write_passrates(table, output["table"])


def _arm(params: Mapping, lr_scale: float = 1.0):
    """(Arm, TrainConfig) of the rule's arm: its resolved fields (grpo_dial.core.dial.read_arm
    ran at DAG build; rebuilt here with one check per field), the train section, and the pool
    the pass rates were estimated on; the config carries the arm's allocation."""
    from dataclasses import replace

    from grpo_dial.core.dial import arm_from_fields
    from grpo_dial.stages.fingerprint import fingerprint
    from grpo_dial.train.config import TrainConfig

    config = TrainConfig(
        **params["train"],
        train_pool=params["pass_rates"]["pool"],
        pool_seed=params["pass_rates"]["seed"],
        seed=int(params.get("seed", 0)),
        attn_implementation=params.get("attn_implementation", "sdpa"),
        device=params["device"],
        lr_scale=lr_scale,
        code=fingerprint("train"),  # the source it runs: a checkpoint of other code is set aside
    )
    arm = arm_from_fields(params["arm"])
    return arm, replace(config, allocation=arm.allocation)


def calibrate_lr(input: Mapping, output: Mapping, params: Mapping) -> None:
    """The norm of one optimizer step of this dial on a fixed calibration batch."""
    from grpo_dial.policy.model import load_policy
    from grpo_dial.train.step import calibration_update_norm

    params = _prepare_job(params)
    task = _task(params)
    # float32 like the training run: bf16 weights would round away AdamW steps of size ~lr
    model, tokenizer = load_policy(
        base_model_path(input, params),
        device=params["device"],
        dtype="float32",
        attn_implementation=params.get("attn_implementation", "sdpa"),
    )
    arm, config = _arm(params)
    norm = calibration_update_norm(model, tokenizer, task, arm.dial, config)
    log.info("update norm of one step on the calibration batch: %.4g", norm)
    write_table(pd.DataFrame({"update_norm": [norm]}), output["calibration"])


def train(input: Mapping, output: Mapping, params: Mapping) -> None:
    """One RL run of one arm and seed on the arm's backend (grpo_dial.backends); resumes from
    its checkpoint when one exists."""
    from grpo_dial.backends import Job, train_arm
    from grpo_dial.passrates.tables import read_passrates
    from grpo_dial.train.step import lr_match_factor

    params = _prepare_job(params)
    scale = 1.0
    if "calibration" in input:
        norm = float(read_table(input["calibration"])["update_norm"].iloc[0])
        reference = float(read_table(input["reference"])["update_norm"].iloc[0])
        if reference > 0 and norm > 0:
            scale = lr_match_factor(reference, norm)
        else:  # a calibration batch of silent groups carries no step to match
            log.warning(
                "learning-rate matching skipped: a calibration update norm is 0 "
                "(every calibration group silent); lr is not scaled"
            )
        log.info(
            "learning-rate matching: factor %.4g (reference %.4g, arm %.4g)", scale, reference, norm
        )
    arm, config = _arm(params, lr_scale=scale)
    train_arm(
        Job(
            arm=arm,
            base=base_model_path(input, params),
            task=params["task"],
            config=config,
            outputs=dict(output),
            checkpoint_dir=str(params["checkpoint_dir"]),
            pass_rates=read_passrates(input["passrates"]) if "passrates" in input else None,
            pass_rates_path=str(input["passrates"]) if "passrates" in input else None,
            launch=dict(params.get("trl") or {}),
        )
    )

"""An arm's dial as TRL's GRPOConfig, or the one field TRL cannot express; no torch at import.

`train.backend: trl` (or an arm's own `backend: trl`) trains the arm with TRL's GRPOTrainer
(grpo_dial.backends.trl.run). Its dial translates field by field (TRL 1.16, grpo_trainer.py
`_generate_and_score_completions` and `_compute_loss`):

    std_power 1 / 0          scale_rewards 'group' / 'none': A = (r - mean_g) / (std_g + 1e-4),
                             std_g the sample std (torch.std), or A = r - mean_g
    std_scope batch          scale_rewards 'batch': the sample std of every reward of the
                             generation batch (gathered over processes) instead of std_g
    length_norm sequence     loss_type 'grpo': mean over each response's tokens, then responses
    length_norm token        loss_type 'dapo': sum over the generation batch / its token count
                             (num_items_in_batch, gathered over processes and accumulation
                             steps), our token mean's scope exactly; 'bnpo' divides by the
                             tokens of one micro-batch on one process, which differs as soon as
                             the batch is split
    length_norm constant     loss_type 'dr_grpo': sum / (responses x max_completion_length), so
                             the dial's max_length must be the generation limit max_new_tokens
    length_norm sequence_sum loss_type 'luspo': each response's token sum, mean over responses
    length_norm bnpo         loss_type 'bnpo': the token mean of each micro-batch, averaged;
                             per_device_train_batch_size = bnpo_rows (it must divide each
                             process's share of the step; TRL shuffles rows before splitting)
    ratio_level              importance_sampling_level 'token' / 'sequence' (GSPO)
    clip_low / clip_high     epsilon / epsilon_high
    group_size (train)       num_generations; prompts_per_step x G completions per step
    kl_coef                  beta, use_bias_correction_kl False: the k3 estimator
                             exp(d) - d - 1, d = log pi_ref - log pi, against the base policy,
                             as ours; TRL's default multiplies it by the ratio pi / pi_old,
                             which changes the KL gradient whenever beta > 0 (even on-policy:
                             the ratio is 1 but its gradient is not 0) and its value once a
                             batch is reused
    updates_per_batch        num_iterations, and max_steps = steps x updates_per_batch: TRL's
                             max_steps counts optimizer steps and it samples a new batch every
                             num_iterations of them, so `steps` batches are drawn, as ours;
                             TRL's global step g is the own trainer's step ceil(g / u)
                             (`batch_of`)
    (vLLM sampling)          vllm_importance_sampling_correction False: the old log-probs are
                             the training model's forward (TRL recomputes them when vLLM
                             samples), as ours, and no sampler mismatch weight enters the
                             loss (TRL's default 'sequence_mask' multiplies each response's
                             loss by pi_train / pi_vLLM of the response and zeroes it where
                             that ratio exceeds 3): the own trainer samples with the model it
                             trains, so it has no such weight to match

TRL fixes the std's ddof (1) and eps (1e-4): with std_power 1 a dial that differs is refused, the
`trl_grpo` dial {preset: grpo, std_ddof: 1, eps: 0.0001} matches. With std_power 0 they do not
enter A, so any value is accepted. Refused, one line naming the field: std_power strictly between
0 and 1 (TRL scales by the std or not at all), silent 'drop' (dynamic sampling refills the batch
with new generations; TRL generates once per step), group_size 'adaptive' (TRL's sampler gives
every prompt num_generations), and every registered estimator whose entry does not list `trl`
among its backends (core.estimators.refusal: lambda-GRPO's length_norm 'lambda', strata,
anchor, and of the engines' the baselines other than the mean, gpg_scale, whiten, singleton
'reward', length_norm 'sum' and empty_rows 'skip'), each by the field that switches it on and
the reason its entry gives. Nothing here
imports torch: the DAG build (grpo_dial.dag.plan) calls `backend_error` on the arms it
resolved, at parse time.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import fields

from grpo_dial.core import estimators
from grpo_dial.core.dial import Arm, Dial
from grpo_dial.train.config import TrainConfig

TRL_STD_DDOF = 1  # torch.std: the sample std
TRL_EPS = 1e-4  # added to the std in _generate_and_score_completions
LOSS_TYPES = {
    "sequence": "grpo", "token": "dapo", "constant": "dr_grpo", "sequence_sum": "luspo",
    "bnpo": "bnpo",
}  # fmt: skip


def refusal(dial: Dial, max_new_tokens: int, adaptive: bool = False) -> tuple[str, str] | None:
    """(field, why) of the first dial field TRL cannot express, or None when it translates:
    the core fields' translation here, then every registered estimator TRL does not express."""
    core = (
        ("std_power", dial.std_power not in (0, 1),
         "TRL's scale_rewards divides by the std (std_power 1) or not at all (0)"),
        ("std_ddof", dial.std_power == 1 and dial.std_ddof != TRL_STD_DDOF,
         f"TRL fixes the sample std (std_ddof {TRL_STD_DDOF})"),
        ("eps", dial.std_power == 1 and dial.eps != TRL_EPS,
         f"TRL fixes eps = {TRL_EPS} added to the std"),
        ("silent", dial.silent != "keep",
         "TRL keeps silent groups (no dynamic-sampling refill); use 'keep'"),
        ("group_size", adaptive, "TRL gives every prompt num_generations responses"),
    )  # fmt: skip
    for field, refused, why in core:
        if refused:
            value = "adaptive" if field == "group_size" else getattr(dial, field)
            return field, f"{field} = {value!r}: {why}"
    if (why := estimators.refusal(dial, "trl")) is not None:
        return why
    if dial.length_norm not in LOSS_TYPES:
        return "length_norm", f"length_norm = {dial.length_norm!r}: TRL has no such loss_type"
    if dial.length_norm == "constant" and dial.max_length != max_new_tokens:
        return "max_length", (
            f"max_length = {dial.max_length!r}: TRL's dr_grpo divides by max_completion_length "
            f"= train.max_new_tokens ({max_new_tokens})"
        )
    return None


def backend_error(arms: Mapping[str, Arm], max_new_tokens: int) -> str | None:
    """One line for the first trl arm whose dial TRL cannot express, else None. arms: the DAG's
    resolved arms (grpo_dial.dag.arms.resolve_arms), each with its backend; max_new_tokens:
    train.max_new_tokens (TRL's max_completion_length)."""
    for name, arm in arms.items():
        if arm.backend != "trl":
            continue
        adaptive = arm.allocation.scheme == "adaptive"
        if (why := refusal(arm.dial, max_new_tokens, adaptive)) is not None:
            field, text = why
            return (
                f"config error at 'dials.{name}.{field}': the trl backend cannot train "
                f"{text} (backend: own can; config/trl.yaml restates the default's arms for TRL)"
            )
    return None


def split_error(
    dial: Dial, prompts_per_step: int, group_size: int, processes: int
) -> tuple[str, str] | None:
    """("processes", why) when the step's prompts_per_step x group_size completions do not split
    evenly over `processes` (accelerate's, one per GPU or CPU process); ("bnpo_rows", why) when a
    bnpo dial's bnpo_rows does not divide one process's share (TRL's
    per_device_train_batch_size); None when the batch splits."""
    completions = prompts_per_step * group_size
    if completions % processes:
        return "processes", (
            f"prompts_per_step x group_size = {completions} completions do not split evenly "
            f"over {processes} processes"
        )
    share = completions // processes
    if dial.length_norm == "bnpo" and share % dial.bnpo_rows:
        return "bnpo_rows", (
            f"bnpo_rows = {dial.bnpo_rows} does not divide each process's {share} "
            f"completions (TRL's per_device_train_batch_size)"
        )
    return None


def grpo_config_kwargs(dial: Dial, train: Mapping, processes: int = 1) -> dict:
    """GRPOConfig keywords of the dial and the train section (a dial `refusal` accepts).

    train: TrainConfig fields (steps, prompts_per_step, group_size, lr, lr_scale, optimizer,
    weight_decay, betas, grad_clip, max_new_tokens, temperature, updates_per_batch, kl_coef,
    micro_batch, seed, precision). One optimizer step per batch of prompts_per_step x G
    completions, as ours, spread over `processes` (accelerate's, one per GPU); a micro_batch
    splits each process's share into gradient-accumulation steps; a field `train` leaves out is
    TrainConfig's default."""
    defaults = TrainConfig()
    train = {f.name: getattr(defaults, f.name) for f in fields(defaults)} | dict(train)
    if (why := refusal(dial, train["max_new_tokens"])) is not None:
        raise ValueError(f"the trl backend cannot train {why[1]}")
    if (why := split_error(dial, train["prompts_per_step"], train["group_size"], processes)):
        raise ValueError(why[1])
    share = train["prompts_per_step"] * train["group_size"] // processes
    micro = train["micro_batch"] or share
    micro = max(d for d in range(1, min(micro, share) + 1) if share % d == 0)
    if dial.length_norm == "bnpo":  # the micro-batch is the normalizer's scope: the dial's
        micro = dial.bnpo_rows
    updates = train["updates_per_batch"]
    optim = {"adamw": "adamw_torch", "sgd": "sgd"}[train["optimizer"]]
    betas = tuple(train["betas"])
    return {
        "num_generations": train["group_size"],
        "per_device_train_batch_size": micro,
        "gradient_accumulation_steps": share // micro,
        "steps_per_generation": share // micro,
        "max_completion_length": train["max_new_tokens"],
        "temperature": train["temperature"],
        "top_p": 1.0,
        "top_k": 0,
        "scale_rewards": "none" if dial.std_power == 0 else dial.std_scope,
        "loss_type": LOSS_TYPES[dial.length_norm],
        "importance_sampling_level": dial.ratio_level,
        "epsilon": dial.clip_low,
        "epsilon_high": dial.clip_high,
        "beta": train["kl_coef"],
        "use_bias_correction_kl": False,  # the plain k3 KL, as ours
        "vllm_importance_sampling_correction": False,  # ours: no sampler mismatch weight
        "num_iterations": updates,
        "mask_truncated_completions": False,  # ours trains truncated responses too (reward 0)
        "learning_rate": train["lr"] * train["lr_scale"],
        "lr_scheduler_type": "constant",
        "warmup_steps": 0,
        "optim": optim,
        "weight_decay": train["weight_decay"],
        "adam_beta1": betas[0],
        "adam_beta2": betas[1],
        "max_grad_norm": train["grad_clip"] or 0.0,  # None: no clipping
        "max_steps": train["steps"] * updates,  # optimizer steps: `steps` batches drawn
        "seed": train["seed"],
        "bf16": train["precision"] == "bf16",
    }


def batch_of(global_step: int, updates: int) -> int:
    """The own trainer's step (1-based sampled batch) of TRL's optimizer step `global_step`:
    TRL takes `updates` (num_iterations) optimizer steps on each batch, so ceil(g / updates)."""
    return -(-global_step // updates)

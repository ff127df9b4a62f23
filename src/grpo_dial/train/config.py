"""Settings of one RL run (grpo_dial.train.loop), a frozen dataclass of Settings.

The dial (core.dial.Dial) is separate: it says what to do with the group std; this says how
much to sample and how to step, with the spread of each batch's samples over its prompts as one
`Allocation`. Defaults are the embedded CPU default (tiny Llama, arithmetic).

Each field is defined once, by `setting(default, help, range or choices)` (core.settings): the
check in `__post_init__`, the config schema's `train` properties (`config_settings`, generated
by grpo_dial.dag.schema.train_schema) and the trl backend's keywords read that definition; the
fields a job fills from other sections (SET_BY_THE_JOB) are not config keys.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Literal

from grpo_dial.core.allocation import Allocation
from grpo_dial.core.checks import is_real
from grpo_dial.core.checks import opt as _opt
from grpo_dial.core.settings import Setting, check_settings, dataclass_settings, setting

OPTIMIZERS = ("adamw", "sgd")

# Fields that may change between an interrupted run and its resumption without changing the
# numbers (resume continues a checkpoint only when every other field is equal). `steps` is not in
# the key either: a run whose only change is more steps continues (grpo_dial.train.resume).
RESUME_FREE = (
    "progress", "checkpoint_every", "micro_batch", "device", "resume", "checker_warn_fraction",
    "steps", "alive_check_every",
)  # fmt: skip
RESUME_MODES = ("auto", "strict")


# Allocation field -> its name in a checkpoint's resume key (the TrainConfig fields it was once).
CHECKPOINT_NAMES = {
    "scheme": "group_allocation",
    "signal": "allocation_signal",
    "g_min": "g_min",
    "g_max": "g_max",
    "unanimous": "unanimous",
    "prior_strength": "tracker_prior_strength",
    "decay": "tracker_decay",
}


@dataclass(frozen=True)
class TrainConfig:
    """How one dial is trained: batch shape, optimizer, sampling, records, checkpoints. Every
    field but `allocation` and `betas` is one Setting (its default, range or choices, help);
    `__post_init__` runs each Setting's check, then the two composite checks."""

    steps: int = setting(
        100,
        "Optimizer steps (batches). Each samples prompts_per_step x G responses; more steps "
        "continue a checkpoint of the same run.",
        kind=int, low=1,
    )  # fmt: skip
    prompts_per_step: int = setting(
        16,
        "Prompts per batch. With silent='drop' the batch is refilled toward this many "
        "informative groups (DAPO dynamic sampling).",
        kind=int, low=1,
    )  # fmt: skip
    group_size: int = setting(
        8,
        "G responses per prompt (a group of one has no relative advantage). Fidelity of the "
        "per-prompt signal is ~1 - 1/(8 G p(1-p)) (docs/design-notes.md#the-identity); "
        "silent-group rate p^G + (1-p)^G. With allocation.scheme 'adaptive' the batch's budget "
        "is prompts_per_step x group_size responses.",
        kind=int, low=2,
    )  # fmt: skip
    allocation: Allocation = _opt(
        Allocation(),
        "How the batch's prompts_per_step x group_size responses are spread over its prompts "
        "(Allocation: uniform, or adaptive on running pass-rate estimates).",
    )
    lr: float = setting(
        1e-4,
        "Learning rate before lr_scale. On the tiny Llama, 1e-4 raises held-out sampled accuracy "
        "within 100 steps; 1e-3 collapses the policy.",
        kind=float, low=0.0, low_open=True,
    )  # fmt: skip
    optimizer: Literal["adamw", "sgd"] = setting(
        "adamw",
        "'adamw' (every anchor library) or 'sgd'. Adam's first step is ~lr sign(g), "
        "so it undoes any global scale of the advantage (the std factor's average size); pick "
        "SGD to keep it, which is where learning-rate matching matters.",
        choices=OPTIMIZERS,
    )
    weight_decay: float = setting(
        0.0, "Decoupled (AdamW) or L2 (SGD) weight decay; 0 as in TRL.", kind=float, low=0.0
    )
    betas: tuple[float, float] = _opt(
        (0.9, 0.999), "AdamW (beta1, beta2), each in [0, 1); set by the library caller only."
    )
    grad_clip: float | None = setting(
        1.0,
        "Clip the global gradient norm to this (TRL/verl 1.0); None for no clipping. The "
        "recorded grad_norm is before clipping.",
        kind=float, low=0.0, low_open=True, nullable=True,
    )  # fmt: skip
    max_new_tokens: int = setting(
        48,
        "Generation limit; a response without EOS by then is truncated and scores 0. Also "
        "Dr. GRPO's L_max when an arm's max_length is unset.",
        kind=int, low=1,
    )  # fmt: skip
    temperature: float = setting(
        1.0,
        "Sampling temperature (> 0: greedy groups are identical, hence silent). Log-probs for "
        "the loss are at temperature 1 (the policy), so values other than 1 make the first "
        "update slightly off-policy.",
        kind=float, low=0.0, low_open=True,
    )  # fmt: skip
    updates_per_batch: int = setting(
        1,
        "Optimizer steps per sampled batch. 1 = on-policy (ratio 1, clipping inactive); >1 "
        "reuses the batch with the dial's clipped ratio, as PPO/GRPO mini-epochs.",
        kind=int, low=1,
    )  # fmt: skip
    kl_coef: float = setting(
        0.0,
        "beta of the k3 KL estimate to the frozen base policy, exp(d) - d - 1 with "
        "d = log pi_ref - log pi, aggregated like the loss. 0 (off) as Dr. GRPO and DAPO do.",
        kind=float, low=0.0,
    )  # fmt: skip
    train_pool: int = setting(
        256,
        "Training prompts, task.problems('train', train_pool, pool_seed). Keep equal to the "
        "pass-rate estimate's pool so every prompt has a pass-rate band.",
        kind=int, low=1,
    )  # fmt: skip
    pool_seed: int = setting(
        0,
        "Seed of the task's prompt pools (train and heldout); the same for every run seed, "
        "and equal to the pass-rate estimate's seed so prompt ids match its table.",
        kind=int, low=0,
    )  # fmt: skip
    eval_every: int = setting(
        25,
        "Greedy held-out evaluation every this many steps (also at step 0 and the last); "
        "0 = only those two.",
        kind=int, low=0,
    )  # fmt: skip
    heldout_prompts: int = setting(
        128, "Held-out problems, task.problems('heldout', n, pool_seed).", kind=int, low=1
    )
    eval_samples: int = setting(
        4,
        "Sampled held-out evaluation: this many responses per problem at the training temperature "
        "(the pass rate RL optimizes), besides greedy decoding; 0 = greedy only.",
        kind=int, low=0,
    )  # fmt: skip
    checkpoint_every: int = setting(
        10,
        "Save checkpoint_dir/last.pt every this many steps (and at the end); 0 = end only. "
        "Lower loses less work to an interruption and costs a save each time.",
        kind=int, low=0,
    )  # fmt: skip
    identity_every: int = setting(
        25,
        "Measure the identity on the real model every this many steps; 0 = never. Costs "
        "G + 1 backward passes per probed group.",
        kind=int, low=0,
    )  # fmt: skip
    identity_groups: int = setting(
        2, "Informative groups of the batch probed each time.", kind=int, low=1
    )
    max_nonfinite_steps: int = setting(
        3,
        "A non-finite loss or gradient skips the step; this many such steps IN A ROW stop the "
        "run with one line naming the last good checkpoint (a finite step resets the count). "
        "Non-finite weights stop it at once and are never checkpointed.",
        kind=int, low=1,
    )  # fmt: skip
    resume: Literal["auto", "strict"] = setting(
        "auto",
        "A checkpoint of another run (any resume-key change but more steps): 'auto' moves it "
        "aside to superseded-<UTC time>.pt, names it and the changed keys in the log, and "
        "starts afresh; 'strict' stops with one line naming the keys. Either way it is never "
        "overwritten; a matching one is resumed.",
        choices=RESUME_MODES,
    )
    checker_warn_fraction: float = setting(
        0.01,
        "Warn in the log when the answer checker's timeouts, errors, crashes and bad references "
        "exceed this share of a step's checks (they score 0 and are counted per step).",
        kind=float, low=0.0,
    )  # fmt: skip
    seed: int = setting(
        0, "Seeds prompt order and sampling; the run seed of the workflow.", kind=int, low=0
    )
    device: str = setting(
        "cpu", "torch device of the policy: 'cpu', 'cuda', 'cuda:1', ...", kind=str
    )
    lr_scale: float = setting(
        1.0,
        "Multiplies lr; set by learning-rate matching (trainer.lr_match_factor).",
        kind=float, low=0.0, low_open=True,
    )  # fmt: skip
    micro_batch: int | None = setting(
        None,
        "Rows per forward when computing log-probs (memory bound on real models); None = the "
        "whole batch.",
        kind=int, low=1, nullable=True,
    )  # fmt: skip
    generation_batch: int | None = setting(
        None,
        "Rows per decode call when sampling (memory bound on real models); None = the whole "
        "batch. Another value draws other (equally distributed) samples from the same seed.",
        kind=int, low=1, nullable=True,
    )  # fmt: skip
    alive_check_every: int = setting(
        8,
        "Decoding reads how many rows are still running (a host sync) every this many tokens, "
        "not every token; the samples are the same for any value (GPU: higher = fewer stalls).",
        kind=int, low=1,
    )  # fmt: skip
    activation_reuse_mb: float = setting(
        2048.0,
        "Sampling keeps every projection's output (q, k, v, o, gate, up, down) of the responses "
        "when they fit in this many MiB, and the first update's log-prob forward reuses them "
        "instead of recomputing the matmuls (Llama policies, fp32; same values to float "
        "rounding). 0 = off. Size: rows x (max_new_tokens - 1) x sum of projection widths x 4 B.",
        kind=float, low=0.0,
    )  # fmt: skip
    progress: bool = setting(True, "Show a tqdm bar over steps.", kind=bool)
    precision: Literal["fp32", "bf16"] = setting(
        "fp32",
        "'bf16': forwards (generation, log-probs, evaluation) under torch.autocast(bfloat16) "
        "with fp32 master weights and optimizer (policy.autocast); the GPU setting. 'fp32' "
        "everywhere else (bf16 autocast runs on CPU too, but slower).",
        choices=("fp32", "bf16"),
    )  # fmt: skip
    gradient_checkpointing: bool = setting(
        False,
        "Recompute activations in backward (less memory, one more forward pass) for long responses "
        "or big models.",
        kind=bool,
    )
    attn_implementation: str | None = setting(
        "sdpa",
        "Attention kernel passed to from_pretrained ('sdpa', 'eager', 'flash_attention_2').",
        kind=str, nullable=True,
    )  # fmt: skip
    code: str | None = setting(
        None,
        "The fingerprint of the source the train job runs (grpo_dial.stages.fingerprint), set by "
        "the job: part of the resume key, so a checkpoint written by other code is set aside, "
        "never resumed; None outside a train job.",
        kind=str, nullable=True,
    )  # fmt: skip

    def __post_init__(self) -> None:
        check_settings(self)
        if not isinstance(self.allocation, Allocation):
            raise ValueError(f"allocation must be an Allocation, got {self.allocation!r}")
        betas = tuple(self.betas) if isinstance(self.betas, list | tuple) else ()
        if len(betas) != 2 or not all(is_real(b) and 0 <= b < 1 for b in betas):
            raise ValueError(f"betas must be two numbers in [0, 1), got {self.betas!r}")
        object.__setattr__(self, "betas", tuple(float(b) for b in betas))

    def resume_key(self) -> dict[str, object]:
        """The fields a checkpoint must match to be resumed (all but RESUME_FREE), as plain
        values; the allocation's under the flat names checkpoints have always stored."""
        key = {f.name: getattr(self, f.name) for f in fields(self) if f.name not in RESUME_FREE}
        allocation = key.pop("allocation")
        for f in fields(allocation):
            key[CHECKPOINT_NAMES[f.name]] = getattr(allocation, f.name)
        return key


# TrainConfig fields the config's `train` block does not set: a train job fills them from other
# sections (pass_rates.pool and .seed, the run's seed, model.device, the lr calibration,
# model.attn_implementation, the rule's source fingerprint) or leaves them at their defaults
# (progress).
SET_BY_THE_JOB = (
    "train_pool", "pool_seed", "seed", "device", "lr_scale", "progress", "attn_implementation",
    "code",
)  # fmt: skip


def config_settings() -> dict[str, Setting]:
    """The TrainConfig fields the config's `train` block sets, each with its one Setting (the
    schema's train properties are generated from these, grpo_dial.dag.schema)."""
    settings = dataclass_settings(TrainConfig)
    return {name: spec for name, spec in settings.items() if name not in SET_BY_THE_JOB}

"""Settings of one RL run (grpo_dial.train.loop), a frozen dataclass with help text per field.

The dial (advantage.Dial) is separate: it says what to do with the group std; this says how
much to sample and how to step, with the spread of each batch's samples over its prompts as one
`Allocation`. Defaults are the embedded CPU default (tiny Llama, arithmetic).
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Literal

from grpo_dial.core.checks import check_at_least, check_int, is_real
from grpo_dial.core.checks import opt as _opt
from grpo_dial.core.dial import Allocation

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
    """How one dial is trained: batch shape, optimizer, sampling, records, checkpoints."""

    steps: int = _opt(100, "Optimizer steps (batches). Each samples prompts_per_step x G.")
    prompts_per_step: int = _opt(
        16,
        "Prompts per batch. With silent='drop' the batch is refilled toward this many "
        "informative groups (DAPO dynamic sampling).",
    )
    group_size: int = _opt(
        8,
        "G responses per prompt. Fidelity of the per-prompt signal is ~1 - 1/(8 G p(1-p)) "
        "(docs/design-notes.md#the-identity); silent-group rate p^G + (1-p)^G. With "
        "allocation.scheme 'adaptive' "
        "the batch's budget is prompts_per_step x group_size responses.",
    )
    allocation: Allocation = _opt(
        Allocation(),
        "How the batch's prompts_per_step x group_size responses are spread over its prompts "
        "(Allocation: uniform, or adaptive on running pass-rate estimates).",
    )
    lr: float = _opt(
        1e-4,
        "Learning rate before lr_scale. On the tiny Llama, 1e-4 raises held-out sampled accuracy "
        "within 100 steps; 1e-3 collapses the policy.",
    )
    optimizer: Literal["adamw", "sgd"] = _opt(
        "adamw",
        "'adamw' (every anchor library) or 'sgd'. Adam's first step is ~lr sign(g), "
        "so it undoes any global scale of the advantage (the std factor's average size); SGD "
        "keeps it, which is where learning-rate matching matters.",
    )
    weight_decay: float = _opt(0.0, "Decoupled (AdamW) or L2 (SGD) weight decay; 0 as in TRL.")
    betas: tuple[float, float] = _opt((0.9, 0.999), "AdamW (beta1, beta2).")
    grad_clip: float | None = _opt(
        1.0,
        "Clip the global gradient norm to this (TRL/verl 1.0); None for no clipping. The "
        "recorded grad_norm is before clipping.",
    )
    max_new_tokens: int = _opt(
        48, "Generation limit; a response without EOS by then is truncated and scores 0."
    )
    temperature: float = _opt(
        1.0,
        "Sampling temperature. Log-probs for the loss are at temperature 1 (the policy), "
        "so values other than 1 make the first update slightly off-policy.",
    )
    updates_per_batch: int = _opt(
        1,
        "Optimizer steps per sampled batch. 1 = on-policy (ratio 1, clipping inactive); >1 "
        "reuses the batch with the dial's clipped ratio, as PPO/GRPO mini-epochs.",
    )
    kl_coef: float = _opt(
        0.0,
        "beta of the k3 KL estimate to the frozen base policy, exp(d) - d - 1 with "
        "d = log pi_ref - log pi, aggregated like the loss. 0 (off) as Dr. GRPO and DAPO do.",
    )
    train_pool: int = _opt(
        256,
        "Training prompts, task.problems('train', train_pool, pool_seed). Keep equal to the "
        "pass-rate estimate's pool so every prompt has a pass-rate band.",
    )
    pool_seed: int = _opt(
        0,
        "Seed of the task's prompt pools (train and heldout); the same for every run seed, "
        "and equal to the pass-rate estimate's seed so prompt ids match its table.",
    )
    eval_every: int = _opt(
        25,
        "Greedy held-out evaluation every this many steps (also at step 0 and the last); "
        "0 = only those two.",
    )
    heldout_prompts: int = _opt(128, "Held-out problems, task.problems('heldout', n, pool_seed).")
    eval_samples: int = _opt(
        4,
        "Sampled held-out evaluation: this many responses per problem at the training temperature "
        "(the pass rate RL optimizes), besides greedy decoding; 0 = greedy only.",
    )
    checkpoint_every: int = _opt(
        10, "Save checkpoint_dir/last.pt every this many steps (and at the end); 0 = end only."
    )
    identity_every: int = _opt(
        25,
        "Measure the identity on the real model every this many steps; 0 = never. Costs "
        "G + 1 backward passes per probed group.",
    )
    identity_groups: int = _opt(2, "Informative groups of the batch probed each time.")
    max_nonfinite_steps: int = _opt(
        3,
        "A non-finite loss or gradient skips the step; this many such steps IN A ROW stop the "
        "run (a finite step resets the count). Non-finite weights stop it at once.",
    )
    resume: Literal["auto", "strict"] = _opt(
        "auto",
        "A checkpoint of another run (a changed key): 'auto' moves it aside to "
        "superseded-<time>.pt and starts afresh; 'strict' stops with one line naming the keys. "
        "Either way it is never overwritten; a matching one (more steps allowed) is resumed.",
    )
    checker_warn_fraction: float = _opt(
        0.01,
        "Warn in the log when the answer checker's timeouts, errors, crashes and bad references "
        "exceed this share of a step's checks (they score 0 and are counted per step).",
    )
    seed: int = _opt(0, "Seeds prompt order and sampling; the run seed of the workflow.")
    device: str = _opt("cpu", "torch device of the policy: 'cpu', 'cuda', 'cuda:1', ...")
    lr_scale: float = _opt(
        1.0, "Multiplies lr; set by learning-rate matching (trainer.lr_match_factor)."
    )
    micro_batch: int | None = _opt(
        None, "Rows per forward when computing log-probs (memory bound); None = whole batch."
    )
    generation_batch: int | None = _opt(
        None,
        "Rows per decode call when sampling (memory bound on real models); None = the whole "
        "batch. Another value draws other (equally distributed) samples from the same seed.",
    )
    alive_check_every: int = _opt(
        8,
        "Decoding reads how many rows are still running (a host sync) every this many tokens, "
        "not every token; the samples are the same for any value (GPU: higher = fewer stalls).",
    )
    activation_reuse_mb: float = _opt(
        2048.0,
        "Sampling keeps every projection's output (q, k, v, o, gate, up, down) of the responses "
        "when they fit in this many MiB, and the first update's log-prob forward reuses them "
        "instead of recomputing the matmuls (Llama policies, fp32; same values to float "
        "rounding). 0 = off. Size: rows x (max_new_tokens - 1) x sum of projection widths x 4 B.",
    )
    progress: bool = _opt(True, "Show a tqdm bar over steps.")
    precision: Literal["fp32", "bf16"] = _opt(
        "fp32",
        "'bf16': forwards (generation, log-probs, evaluation) under torch.autocast(bfloat16) "
        "with fp32 master weights and optimizer (policy.autocast); the GPU setting. 'fp32' "
        "everywhere else (bf16 autocast runs on CPU too, but slower).",
    )
    gradient_checkpointing: bool = _opt(
        False, "Recompute activations in backward (less memory, ~30% more compute) for big models."
    )
    attn_implementation: str | None = _opt(
        "sdpa", "Attention kernel passed to from_pretrained ('sdpa', 'eager', 'flash_attention_2')."
    )

    def __post_init__(self) -> None:
        ints = {
            "steps": 1,
            "prompts_per_step": 1,
            "group_size": 1,
            "max_new_tokens": 1,
            "updates_per_batch": 1,
            "train_pool": 1,
            "pool_seed": 0,
            "eval_every": 0,
            "heldout_prompts": 1,
            "eval_samples": 0,
            "checkpoint_every": 0,
            "identity_every": 0,
            "identity_groups": 1,
            "max_nonfinite_steps": 1,
            "seed": 0,
            "alive_check_every": 1,
        }
        for name, lo in ints.items():
            check_int(name, getattr(self, name), lo)
        if self.micro_batch is not None:
            check_int("micro_batch", self.micro_batch, 1)
        if self.generation_batch is not None:
            check_int("generation_batch", self.generation_batch, 1)
        check_at_least("activation_reuse_mb", self.activation_reuse_mb, 0.0)
        check_at_least("checker_warn_fraction", self.checker_warn_fraction, 0.0)
        if self.resume not in RESUME_MODES:
            raise ValueError(
                f"resume={self.resume!r} is not valid; choose one of {', '.join(RESUME_MODES)}"
            )
        for name in ("lr", "lr_scale"):
            check_at_least(name, getattr(self, name), 0.0, strict=True)
        if not isinstance(self.allocation, Allocation):
            raise ValueError(f"allocation must be an Allocation, got {self.allocation!r}")
        for name in ("weight_decay", "temperature", "kl_coef"):
            check_at_least(name, getattr(self, name), 0.0)
        if self.grad_clip is not None:
            check_at_least("grad_clip", self.grad_clip, 0.0, strict=True)
        if self.optimizer not in OPTIMIZERS:
            raise ValueError(
                f"optimizer={self.optimizer!r} is not valid; choose one of {', '.join(OPTIMIZERS)}"
            )
        betas = tuple(self.betas) if isinstance(self.betas, list | tuple) else ()
        if len(betas) != 2 or not all(is_real(b) and 0 <= b < 1 for b in betas):
            raise ValueError(f"betas must be two numbers in [0, 1), got {self.betas!r}")
        object.__setattr__(self, "betas", tuple(float(b) for b in betas))
        if not isinstance(self.device, str) or not self.device:
            raise ValueError(f"device must be a torch device string, got {self.device!r}")
        if not isinstance(self.progress, bool):
            raise ValueError(f"progress must be a bool, got {self.progress!r}")
        if self.precision not in ("fp32", "bf16"):
            raise ValueError(f"precision={self.precision!r} is not valid; choose one of fp32, bf16")
        if not isinstance(self.gradient_checkpointing, bool):
            raise ValueError(
                f"gradient_checkpointing must be a bool, got {self.gradient_checkpointing!r}"
            )
        if self.attn_implementation is not None and not (
            isinstance(self.attn_implementation, str) and self.attn_implementation
        ):
            raise ValueError(
                f"attn_implementation must be a name or None, got {self.attn_implementation!r}"
            )

    def resume_key(self) -> dict[str, object]:
        """The fields a checkpoint must match to be resumed (all but RESUME_FREE), as plain
        values; the allocation's under the flat names checkpoints have always stored."""
        key = {f.name: getattr(self, f.name) for f in fields(self) if f.name not in RESUME_FREE}
        allocation = key.pop("allocation")
        for f in fields(allocation):
            key[CHECKPOINT_NAMES[f.name]] = getattr(allocation, f.name)
        return key

"""The tiny policy: a character-level tokenizer and a small Llama, both plain Hugging Face objects.

Saved with `save_pretrained`, the pair loads through `AutoTokenizer` / `AutoModelForCausalLM`
exactly like a hub model, so every later stage takes a path or a hub id and never needs to know
the policy is tiny. Token ids: <pad>=0, <bos>=1, <eos>=2, <unk>=3, then the alphabet in order.

Real models: `load_policy` takes any causal LM with an attention implementation (default sdpa)
and optional gradient checkpointing; `autocast` is the precision scheme of training (fp32 master
weights and optimizer, forwards in bf16 under torch.autocast when precision is "bf16").
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, fields
from pathlib import Path

import torch
from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, processors
from transformers import (
    AutoModelForCausalLM,
    AutoTokenizer,
    LlamaConfig,
    LlamaForCausalLM,
    PreTrainedModel,
    PreTrainedTokenizerBase,
    PreTrainedTokenizerFast,
)

from grpo_dial.core.checks import opt as _opt
from grpo_dial.data.sources import check_hub_id, hub_failure, hub_model_id, missing_path

SPECIAL_TOKENS = ("<pad>", "<bos>", "<eos>", "<unk>")
DTYPES = {"bfloat16": torch.bfloat16, "float32": torch.float32}
PRECISIONS = ("fp32", "bf16")


def build_char_tokenizer(alphabet: str) -> PreTrainedTokenizerFast:
    """One token per character of `alphabet` (duplicates ignored) plus the four special tokens.

    Every character is its own pre-token and the decoder concatenates without separators, so
    decode(encode(s)) == s for any s over the alphabet; other characters map to <unk>.
    `tokenizer(text)` prepends <bos> as Llama tokenizers do; padding is on the left (generation).
    """
    if not isinstance(alphabet, str) or not alphabet:
        raise ValueError(f"alphabet must be a non-empty string, got {alphabet!r}")
    clash = [t for t in SPECIAL_TOKENS if t in alphabet]
    if clash:
        raise ValueError(f"alphabet must not contain the special token(s) {', '.join(clash)}")
    chars = list(dict.fromkeys(alphabet))
    vocab = {tok: i for i, tok in enumerate([*SPECIAL_TOKENS, *chars])}
    core = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    # Oniguruma has no (?s); [\s\S] is "any character, newline included".
    core.pre_tokenizer = pre_tokenizers.Split(Regex(r"[\s\S]"), behavior="isolated")
    core.decoder = decoders.Fuse()
    core.post_processor = processors.TemplateProcessing(
        single="<bos> $A", pair="<bos> $A $B", special_tokens=[("<bos>", vocab["<bos>"])]
    )
    return PreTrainedTokenizerFast(
        tokenizer_object=core,
        pad_token="<pad>",
        bos_token="<bos>",
        eos_token="<eos>",
        unk_token="<unk>",
        padding_side="left",
        clean_up_tokenization_spaces=False,
    )




@dataclass(frozen=True)
class PolicySpec:
    """Shape of the tiny Llama. The default is 3 x 128 (about 0.6 M parameters)."""

    n_layers: int = _opt(
        3, "Transformer blocks."
    )
    hidden_size: int = _opt(
        128, "Width of the residual stream; must be divisible by n_heads. Cost grows ~ width^2."
    )
    n_heads: int = _opt(4, "Attention heads (and key/value heads: no grouped-query attention).")
    intermediate_size: int = _opt(384, "Width of the SwiGLU feed-forward layer (3 x hidden).")
    max_position_embeddings: int = _opt(
        256, "Longest prompt + response in tokens (characters); RoPE needs no learned table."
    )
    tie_word_embeddings: bool = _opt(
        True, "Share the input embedding and the output head: fewer parameters, as small LMs do."
    )

    def __post_init__(self) -> None:
        for f in fields(self):
            v = getattr(self, f.name)
            if f.name == "tie_word_embeddings":
                if not isinstance(v, bool):
                    raise ValueError(f"tie_word_embeddings must be a bool, got {v!r}")
            elif isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"{f.name} must be an integer >= 1, got {v!r}")
        if self.hidden_size % self.n_heads:
            raise ValueError(
                f"hidden_size {self.hidden_size} is not divisible by n_heads {self.n_heads}"
            )


def build_tiny_llama(
    spec: PolicySpec, tokenizer: PreTrainedTokenizerBase, seed: int
) -> LlamaForCausalLM:
    """A freshly initialized LlamaForCausalLM with the tokenizer's vocabulary and special ids.

    Initialization draws from a forked torch RNG seeded with `seed`: the same seed gives the same
    weights and the caller's global RNG state is left untouched.
    """
    ids = {k: getattr(tokenizer, f"{k}_token_id") for k in ("bos", "eos", "pad")}
    if any(v is None for v in ids.values()):
        raise ValueError(f"tokenizer needs bos, eos and pad tokens, got ids {ids}")
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=spec.hidden_size,
        intermediate_size=spec.intermediate_size,
        num_hidden_layers=spec.n_layers,
        num_attention_heads=spec.n_heads,
        num_key_value_heads=spec.n_heads,
        max_position_embeddings=spec.max_position_embeddings,
        tie_word_embeddings=spec.tie_word_embeddings,
        bos_token_id=ids["bos"],
        eos_token_id=ids["eos"],
        pad_token_id=ids["pad"],
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(int(seed))
        model = LlamaForCausalLM(config)
    gen = model.generation_config
    gen.bos_token_id, gen.eos_token_id, gen.pad_token_id = ids["bos"], ids["eos"], ids["pad"]
    return model


def save_policy(
    model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, directory: str | Path
) -> None:
    """`save_pretrained` of both into `directory` (created), loadable by `load_policy`."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(directory)
    tokenizer.save_pretrained(directory)


def _resolve_dtype(dtype: str | None, device: str) -> torch.dtype:
    if dtype is None:
        return torch.bfloat16 if str(device).startswith("cuda") else torch.float32
    if dtype not in DTYPES:
        raise ValueError(f"dtype={dtype!r} is not valid; choose one of {', '.join(DTYPES)}, None")
    return DTYPES[dtype]


def load_policy(
    path_or_id: str,
    device: str = "cpu",
    dtype: str | None = None,
    attn_implementation: str | None = "sdpa",
    gradient_checkpointing: bool = False,
) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """Any causal LM and its tokenizer from a local directory or an explicit `hub:<id>`, ready.

    `path_or_id` is a local directory, or "hub:<owner/name>" to read the Hugging Face hub (its
    cache only under HF_HUB_OFFLINE); a missing directory is a one-line error, never a download,
    and no remote code is ever run (the libraries' remote-code switch is never turned on).

    dtype "bfloat16" / "float32" / None (bf16 on CUDA, fp32 elsewhere). attn_implementation is
    passed to from_pretrained ("sdpa", "eager", "flash_attention_2", ...; None = the model's
    default). The tokenizer pads on the left and falls back to the eos token when it has no pad
    token; the model's generation config gets the same pad id. The model comes back in eval mode;
    with gradient_checkpointing (activations recomputed in backward, use_reentrant=False) it comes
    back in train mode with every dropout set to 0, because Hugging Face checkpoints only in
    train mode: the forward is then the eval-mode forward, with less memory.
    """
    text, hub = str(path_or_id), hub_model_id(str(path_or_id))
    if not text.strip():  # Path("") is the working directory: never load it by accident
        raise ValueError("policy path is empty: give a local directory or hub:<owner/name>")
    if hub is not None:
        text = check_hub_id(hub, "model.base")
    elif not Path(text).is_dir():
        raise ValueError(missing_path(text, "policy directory", hint="base: hub:"))
    torch_dtype = _resolve_dtype(dtype, device)
    try:
        tokenizer = AutoTokenizer.from_pretrained(text)
    except (OSError, ValueError) as error:  # hub: unknown id, no network, offline cache miss
        if hub is None:  # a local directory without a usable tokenizer: no hub in the message
            first = (str(error).strip().splitlines() or [type(error).__name__])[0].strip()
            message = f"policy directory {text} has no loadable tokenizer: {first}"
            raise ValueError(message) from None
        if isinstance(error, ValueError):
            raise
        raise ValueError(f"policy {hub_failure(text, error)}") from None
    if tokenizer.pad_token is None:
        if tokenizer.eos_token is None:
            raise ValueError(f"tokenizer of {text} has neither a pad nor an eos token")
        tokenizer.pad_token = tokenizer.eos_token
    tokenizer.padding_side = "left"
    attn = {} if attn_implementation is None else {"attn_implementation": attn_implementation}
    try:
        model = AutoModelForCausalLM.from_pretrained(text, dtype=torch_dtype, **attn)
    except ImportError as error:  # e.g. flash_attention_2 without the flash-attn package
        raise ValueError(
            f"attn_implementation={attn_implementation!r} is not usable here: "
            f"{str(error).splitlines()[0]}"
        ) from error
    model = model.to(device)
    if model.generation_config.pad_token_id is None:
        model.generation_config.pad_token_id = tokenizer.pad_token_id
    if gradient_checkpointing:
        enable_gradient_checkpointing(model)
    else:
        model.eval()
    return model, tokenizer


def disable_dropout(model: torch.nn.Module) -> None:
    """Every nn.Dropout's p and every float `*dropout*` attribute of a module (the attention
    probability dropout of Hugging Face attention layers) set to 0, as TRL's disable_dropout."""
    for module in model.modules():
        if isinstance(module, torch.nn.Dropout):
            module.p = 0.0
        for name, value in list(vars(module).items()):
            if "dropout" in name and isinstance(value, float):
                setattr(module, name, 0.0)


def enable_gradient_checkpointing(model: PreTrainedModel) -> None:
    """Recompute activations in backward (non-reentrant), dropout off, model in train mode."""
    if not getattr(model, "supports_gradient_checkpointing", False):
        raise ValueError(
            f"{type(model).__name__} does not support gradient checkpointing; "
            "set train.gradient_checkpointing: false"
        )
    disable_dropout(model)
    kwargs = {"use_reentrant": False}
    if hasattr(model, "activation_checkpointing_enable"):  # transformers >= 5.2x's name
        model.activation_checkpointing_enable(activation_checkpointing_kwargs=kwargs)
    else:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs=kwargs)
    model.train()


def is_checkpointing(model: torch.nn.Module) -> bool:
    """Whether any layer of `model` recomputes its activations in backward."""
    return any(getattr(m, "gradient_checkpointing", False) is True for m in model.modules())


def autocast(precision: str, device: str) -> contextlib.AbstractContextManager:
    """The forward-pass precision context: torch.autocast(bf16) for "bf16", nothing for "fp32".

    Mixed precision: weights, gradients and optimizer state stay fp32 (AdamW steps of ~lr survive,
    which bf16 weights would round away); inside the context matmuls run in bf16 and autocast keeps
    softmax, logsumexp and norms in fp32. Allowed on CPU too (bf16 autocast works there, but is
    usually slower than fp32: use it for tests, "fp32" for CPU runs).
    """
    if precision not in PRECISIONS:
        raise ValueError(
            f"precision={precision!r} is not valid; choose one of {', '.join(PRECISIONS)}"
        )
    if precision == "fp32":
        return contextlib.nullcontext()
    return torch.autocast(device_type=torch.device(device).type, dtype=torch.bfloat16)

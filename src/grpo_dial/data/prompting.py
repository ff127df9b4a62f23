"""Prompt token ids: through the tokenizer's chat template when it has one, else bos + text.

With a chat template (an instruct model), each prompt text becomes one user turn,
`[{"role": "user", "content": text}]`, rendered with `add_generation_prompt=True` and tokenized
without adding special tokens (the template writes its own, e.g. Llama-3's begin-of-text), so the
policy answers as the assistant. Without one (the char-level tiny Llama, base models), the ids are
bos + text, bos skipped when the tokenizer has none or the text already starts with it.
"""

from __future__ import annotations


def has_chat_template(tokenizer) -> bool:
    """Whether the tokenizer carries a (non-empty) chat template."""
    return bool(getattr(tokenizer, "chat_template", None))


def encode_prompts(tokenizer, texts: list[str]) -> list[list[int]]:
    """Token ids of each prompt: the chat template's rendering if any, else bos + text."""
    texts = list(texts)
    if not texts:
        return []
    if has_chat_template(tokenizer):
        rendered = tokenizer.apply_chat_template(
            [[{"role": "user", "content": t}] for t in texts],
            add_generation_prompt=True,
            tokenize=False,
        )
        return [list(ids) for ids in tokenizer(rendered, add_special_tokens=False)["input_ids"]]
    bos = tokenizer.bos_token_id
    out = []
    for ids in tokenizer(texts, add_special_tokens=False)["input_ids"]:
        out.append(ids if bos is None or (ids and ids[0] == bos) else [bos, *ids])
    return out

"""The one prompt-id rule: the same problem text gets the same id in every table.

    prompt_id = "<prefix>-" + first 16 hex of sha1(utf-8 text as the source gives it)
                + "-<m>" on the m-th repeat of the same text within one read (m >= 1, file order)

Prefixes name the problem family, not the file: "gsm8k" (GSM8K train/test and the logged GSM8K
solutions), "math" (MATH-500 and math_cot_100, both MATH problems), "bigmath", "arith". So a GSM8K
test problem has the same id in the prompt table and in the logged-solutions pass-rate table, and
a MATH problem the same id in MATH-500 and in math_cot_100. The text is hashed as read (before any
whitespace stripping), which is what the pass-rate tables have always done.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

import numpy as np
import pandas as pd

PREFIX = {"gsm8k": "gsm8k", "math500": "math", "math_cot": "math", "bigmath": "bigmath"}


def text_hash(text: str) -> str:
    """First 16 hex digits of sha1 of the text's utf-8 bytes."""
    return hashlib.sha1(text.encode("utf-8")).hexdigest()[:16]


def problem_ids(texts: Iterable[str], prefix: str) -> np.ndarray:
    """prefix-sha1(text)[:16] per text, "-m" appended to the m-th repeat (order given) so ids are
    unique. (N,) object array."""
    base = pd.Series([text_hash(t) for t in texts], dtype=object)
    repeat = base.groupby(base).cumcount().to_numpy()  # (N,) 0 for first occurrence
    ids = (prefix + "-" + base).to_numpy(dtype=object)
    suffix = np.where(repeat > 0, "-" + repeat.astype(str), "")
    return (ids + suffix).astype(object)

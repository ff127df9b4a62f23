"""The prompt-id rule against hashlib directly: prefix, 16 hex, repeats suffixed in order."""

from __future__ import annotations

import hashlib

from grpo_dial.data.ids import PREFIX, problem_ids, text_hash


def test_ids_match_sha1_and_number_repeats() -> None:
    texts = ["a", "b", "a", " a", "a"]
    sha = {t: hashlib.sha1(t.encode("utf-8")).hexdigest()[:16] for t in set(texts)}
    got = problem_ids(texts, "gsm8k").tolist()
    assert got == [
        f"gsm8k-{sha['a']}",
        f"gsm8k-{sha['b']}",
        f"gsm8k-{sha['a']}-1",
        f"gsm8k-{sha[' a']}",  # the text as given: whitespace is part of it
        f"gsm8k-{sha['a']}-2",
    ]
    assert text_hash("\u00e9") == hashlib.sha1("\u00e9".encode()).hexdigest()[:16]
    assert problem_ids([], "x").tolist() == []


def test_prefixes_name_problem_families() -> None:
    assert PREFIX["math500"] == PREFIX["math_cot"] == "math"  # both hold MATH problems
    assert PREFIX["gsm8k"] == "gsm8k" and PREFIX["bigmath"] == "bigmath"

"""Tests for grpo_dial.data.math_reward: answer extraction, math-verify checks, the time limit."""

from __future__ import annotations

import logging
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from grpo_dial.data.math_reward import MAX_ANSWER_CHARS, MathVerifier, extract_answer

# Checkers the worker process imports from this module (tests/ is on the caller's sys.path).


def sleepy_checker(answer: str, reference: str) -> bool:
    """Hangs on "hang" (for far longer than any limit below), else compares strings."""
    if answer == "hang":
        time.sleep(3600)
    return answer == reference


def raising_checker(answer: str, reference: str) -> bool:
    raise ZeroDivisionError("checker failed")


def printing_checker(answer: str, reference: str) -> bool:
    print("noise on stdout {not json")
    print('{"ok": false}' if answer == "trick" else "[1, 2]")
    return answer == reference


def dying_checker(answer: str, reference: str) -> bool:
    if answer == "die":
        os._exit(3)  # the worker process vanishes mid-check
    return answer == reference


def hungry_checker(answer: str, reference: str) -> bool:
    """Asks for 2 GiB on "eat" (past the worker's memory limit in the test below)."""
    if answer == "eat":
        return len(bytearray(2 * 2**30)) > 0
    return answer == reference


CHECKERS = f"{__name__}:"


@pytest.fixture(scope="module")
def verifier():
    v = MathVerifier(timeout=30.0)  # generous: a loaded CI machine must not turn into timeouts
    yield v
    v.close()


# ----------------------------------------------------------------------------- extraction


@pytest.mark.parametrize(
    ("response", "answer", "how"),
    [
        ("so $\\boxed{\\frac{1}{2}}$.", "\\frac{1}{2}", "boxed"),
        ("\\boxed{1} then \\boxed{ {2} }", "{2}", "boxed"),  # the last box wins
        ("\\fbox{7}", "7", "boxed"),
        ("thus \\boxed 12 done", "12", "boxed"),
        ("\\boxed{3} and an unclosed \\boxed{4", "3", "boxed"),
        ("\\boxed{x^{2}} #### 9", "x^{2}", "boxed"),  # a box beats the GSM8K marker
        ("work\n#### 1,000\n", "1000", "hashes"),
        ("#### $18.50 each", "18.50", "hashes"),
        ("The answer is 42 apples.", "42", "answer_is"),
        ("Final answer: $x = 3$ so 7 later", "x = 3", "answer_is"),
        ("the answer is: seven.", "seven", "answer_is"),
        ("We get 3, then 1,234,567 and -2.5 and 2/3", "2/3", "last_number"),
        ("we get -2.5", "-2.5", "last_number"),
        ("no digits at all", None, "none"),
        ("\\boxed{}", None, "none"),
        ("", None, "none"),
    ],
)
def test_extract_answer(response, answer, how):
    assert extract_answer(response) == (answer, how)


def test_extract_answer_bounds():
    assert extract_answer("\\boxed{" + "1" * (MAX_ANSWER_CHARS + 1) + "}") == (None, "none")
    many = "\\boxed{" * 5000 + "x"  # unbalanced boxes: bounded work, no answer from them
    assert extract_answer(many) == (None, "none")
    with pytest.raises(ValueError, match="response must be a str"):
        extract_answer(None)


# ----------------------------------------------------------------------------- math-verify


@pytest.mark.parametrize(
    ("response", "reference", "correct"),
    [
        ("\\boxed{18}", "18", True),
        ("\\boxed{17}", "18", False),
        ("\\boxed{1/2}", "0.5", True),
        ("\\boxed{\\frac{1}{2}}", "0.5", True),
        ("\\boxed{0.5}", "\\frac12", True),
        ("\\boxed{0.51}", "\\frac{1}{2}", False),
        ("\\boxed{1,000}", "1000", True),
        ("#### 1,000", "1000", True),
        ("The answer is 1000.", "1,000", True),
        ("\\boxed{(3, \\pi/2)}", "\\left( 3, \\frac{\\pi}{2} \\right)", True),
        ("\\boxed{(3, \\pi)}", "\\left( 3, \\frac{\\pi}{2} \\right)", False),
        ("\\boxed{\\sqrt{18}}", "3\\sqrt{2}", True),
        ("\\boxed{x = 5}", "5", True),
        ("\\boxed{1+x^2}", "x^2+1", True),
        ("\\boxed{blah}", "5", False),
    ],
)
def test_math_verify_equivalence(verifier, response, reference, correct):
    check = verifier.verify(response, reference)
    assert check.correct is correct and check.status == "ok"


def test_no_answer_is_counted(verifier):
    before = verifier.counts
    check = verifier.verify("I do not know", "3")
    assert (check.correct, check.answer, check.status) == (False, None, "no_answer")
    after = verifier.counts
    assert after["no_answer"] == before["no_answer"] + 1
    assert after["checks"] == before["checks"] + 1


def test_checks_from_threads(verifier):
    cases = [(f"\\boxed{{{i}/4}}", f"{i / 4}", True) for i in range(12)]
    cases += [(f"\\boxed{{{i}}}", f"{i + 1}", False) for i in range(12)]

    def run(case):
        assert threading.current_thread() is not threading.main_thread()
        return verifier.verify(case[0], case[1]).correct

    with ThreadPoolExecutor(max_workers=4) as pool:
        got = list(pool.map(run, cases))
    assert got == [c for _, _, c in cases]


# ----------------------------------------------------------------------------- time limit


def test_pathological_input_is_cut_by_the_limit():
    """10^(10^10) makes sympy work for minutes; the 3 s limit kills the worker and moves on."""
    v = MathVerifier(timeout=3.0)
    try:
        assert v.verify("\\boxed{5}", "5").correct  # worker started and warm
        check = v.verify("surely \\boxed{10^{10^{10}}}", "5")
        assert (check.correct, check.status) == (False, "timeout")
        assert v.verify("\\boxed{2/4}", "0.5").correct  # a fresh worker answers the next one
        counts = v.counts
        assert counts["timeouts"] == 1 and counts["restarts"] == 1 and counts["correct"] == 2
    finally:
        v.close()


def test_injected_slow_checker_times_out_in_a_thread():
    v = MathVerifier(timeout=2.0, checker=CHECKERS + "sleepy_checker")
    results = []

    def run():
        results.append(v.check_answer("ok", "ok"))
        results.append(v.check_answer("hang", "ok"))
        results.append(v.check_answer("ok", "ok"))

    try:
        t = threading.Thread(target=run)
        t.start()
        t.join()
        assert [(r.correct, r.status) for r in results] == [
            (True, "ok"), (False, "timeout"), (True, "ok"),
        ]  # fmt: skip
        assert v.counts["timeouts"] == 1
    finally:
        v.close()


def test_checker_errors_and_crashes_are_counted_as_wrong():
    v = MathVerifier(timeout=30.0, checker=CHECKERS + "raising_checker")
    d = MathVerifier(timeout=30.0, checker=CHECKERS + "dying_checker")
    try:
        check = v.check_answer("1", "1")
        assert (check.correct, check.status) == (False, "error")
        assert v.counts["errors"] == 1
        assert d.check_answer("a", "a").correct
        assert d.check_answer("die", "die").status == "crash"
        assert d.check_answer("a", "a").correct  # restarted
        assert d.counts == {
            "checks": 3, "correct": 2, "no_answer": 0, "timeouts": 0, "errors": 0, "crashes": 1,
            "bad_references": 0, "restarts": 1,
        }  # fmt: skip
    finally:
        v.close()
        d.close()


def test_the_worker_has_a_memory_limit():
    v = MathVerifier(timeout=60.0, checker=CHECKERS + "hungry_checker", memory_mb=1024)
    try:
        assert v.check_answer("a", "a").correct
        check = v.check_answer("eat", "a")  # fails alone, as a MemoryError in the worker
        assert (check.correct, check.status) == (False, "error")
        assert v.check_answer("a", "a").correct and v.counts["errors"] == 1
    finally:
        v.close()
    with pytest.raises(ValueError, match="memory_mb must be a number >= 0"):
        MathVerifier(memory_mb=-1)


def test_a_bad_reference_is_reported_not_scored_silently(verifier, caplog):
    before = verifier.counts
    with caplog.at_level(logging.WARNING, logger="grpo_dial"):
        checks = [verifier.verify("\\boxed{5}", ref) for ref in ("\\boxed{}", "\\boxed{}", "")]
    assert [c.status for c in checks] == ["bad_reference"] * 3
    assert not any(c.correct for c in checks)
    after = verifier.counts
    assert after["bad_references"] - before["bad_references"] == 3
    assert after["errors"] == before["errors"] and after["restarts"] == before["restarts"]
    warned = [r.message for r in caplog.records if "cannot be checked against" in r.message]
    assert len(warned) == 2  # once per reference
    assert verifier.verify("\\boxed{5}", "5").status == "ok"  # the worker is fine


def test_checker_prints_do_not_corrupt_replies():
    v = MathVerifier(timeout=30.0, checker=CHECKERS + "printing_checker")
    try:
        assert [v.check_answer(a, "x").correct for a in ("x", "y", "trick", "x")] == [
            True, False, False, True,
        ]  # fmt: skip
        assert v.counts["errors"] == 0
    finally:
        v.close()


def test_bad_settings():
    with pytest.raises(ValueError, match="verify timeout must be a number of seconds > 0"):
        MathVerifier(timeout=0)
    with pytest.raises(ValueError, match="checker must be 'module:function'"):
        MathVerifier(checker="nocolon")
    v = MathVerifier(checker="no_such_module_here:check")
    with pytest.raises(RuntimeError, match="did not start: ModuleNotFoundError"):
        v.check_answer("1", "1")

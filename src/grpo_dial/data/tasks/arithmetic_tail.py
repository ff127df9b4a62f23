"""The arithmetic task's checking tail: re-computations after the answer, never read by the verdict.

Grammar (task option tail_checks = K > 0; K = 0 is the original task, no tail):
    response = solution { "&" check }        solution: the base grammar, ... "#" answer
    check    = step { ";" step }             the same sum recomputed, operands rotated
Check j (j = 1..) of a demonstration adds the operands rotated left by j (mod o): for 17+305+9=,
check 1 is "305+9=314;314+17=331", check 2 "9+17=26;26+305=331". A demonstration carries
J ~ Uniform{0..K} checks, drawn independently of the problem and the style, so the base policy's
tail length is blind to correctness by construction.

Verification reads only the solution, the text before the FIRST "&":
    verify(problem, s + t, finished) = verify(problem, s, finished)   for every t starting "&",
since no character at or after the first "&" is read. A tail can therefore never change the
verdict, with the one exception every task shares: a response cut at the length limit is wrong,
so size max_new_tokens to hold the longest solution plus K checks.

Channel. A check's value is the digit string after its last "="; a response's check disagrees
when some check's value differs from the stated answer (the digits after the solution's last
"#"). A wrong answer followed by a correctly recomputed sum disagrees with it, in the policy's own
context, before it decides whether to write another check: that is what a correctness-aware tail
can condition on. The base policy has only seen agreeing checks.

Length split: the tail (every character from the first "&") is counted as redundant, next to the
solution's own redundant re-checks; work is the rest of the solution.
"""

from __future__ import annotations

from typing import NamedTuple

TAIL = "&"
MAX_TAIL_CHECKS = 8


class Channel(NamedTuple):
    """What a response's tail shows: checks written, tail characters, and the checks' verdicts."""

    n_checks: int  # "&"-separated checks after the solution
    tail_chars: int  # characters from the first "&" to the end
    n_valued: int  # checks that end in "=" digits (a value to compare)
    disagree: bool  # some valued check differs from the stated answer
    checks_right: int  # valued checks equal to the true sum


def split_tail(response: str) -> tuple[str, str]:
    """(solution, tail): the tail starts at the first TAIL character ("" when there is none)."""
    at = response.find(TAIL)
    return (response, "") if at < 0 else (response[:at], response[at:])


def check_lines(xs: list[int], count: int) -> str:
    """count checks, check j summing xs rotated left by j, each as running partial sums."""
    out = []
    for j in range(1, count + 1):
        r = j % len(xs)
        order = xs[r:] + xs[:r]
        total, steps = order[0], []
        for x in order[1:]:
            steps.append(f"{total}+{x}={total + x}")
            total += x
        out.append(TAIL + ";".join(steps))
    return "".join(out)


def check_values(tail: str) -> list[str | None]:
    """The value of every check of `tail` (digits after its last "="), None where it has none."""
    values: list[str | None] = []
    for check in tail.split(TAIL)[1:]:
        value = check[check.rfind("=") + 1 :] if "=" in check else ""
        values.append(value if value.isascii() and value.isdigit() else None)
    return values


def channel(response: str, answer: str | None, reference: str) -> Channel:
    """The tail's Channel for a response whose solution states `answer` (None: no answer)."""
    _, tail = split_tail(response)
    values = check_values(tail)
    valued = [v for v in values if v is not None]
    return Channel(
        n_checks=len(values),
        tail_chars=len(tail),
        n_valued=len(valued),
        disagree=any(v != answer for v in valued),
        checks_right=sum(v == reference for v in valued),
    )

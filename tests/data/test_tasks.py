"""Tests for grpo_dial.data.tasks: the arithmetic task against hand-written cases and slow
references.
"""

from __future__ import annotations

import hashlib
import itertools
import re
import time

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from grpo_dial.data.tasks import TASKS, ArithmeticTask, Problem, Task, get_task
from grpo_dial.data.tasks.arithmetic import MAX_ANSWER_CHARS
from grpo_dial.data.tasks.arithmetic_problems import split_of
from grpo_dial.data.tasks.base import SPLITS, LengthSplit

FAST = settings(max_examples=50, deadline=None)
TASK = ArithmeticTask()
P331 = Problem("arith-x", "17+305+9=", "331", "o3d3")


# ------------------------------------------------------------------------------ references


def ref_split(prompt: str) -> str:
    """Split by the sha1 position, computed without the module's helpers."""
    u = int(hashlib.sha1(prompt.encode()).hexdigest()[:16], 16) / 2**64
    return "train" if u < 0.5 else "eval" if u < 0.75 else "heldout"


def ref_operands(prompt: str) -> list[str]:
    assert prompt.endswith("=")
    return prompt[:-1].split("+")


def ref_verify(reference: str, response: str, finished: bool) -> bool:
    """Correct iff finished and the text after the last '#' is exactly the reference (regex)."""
    m = re.fullmatch(r"(?s).*#([0-9]+)", response)
    return finished and m is not None and m.group(1) == reference


def is_step(seg: str) -> bool:
    left, eq, right = seg.partition("=")
    a, plus, b = left.partition("+")
    return bool(eq and plus) and all(x and set(x) <= set("0123456789") for x in (a, b, right))


def ref_chain(prompt: str) -> list[str]:
    """The problem's worked steps by a plain loop."""
    xs = [int(x) for x in ref_operands(prompt)]
    chain, acc = [], xs[0]
    for x in xs[1:]:
        chain.append(f"{acc}+{x}={acc + x}")
        acc += x
    return chain


def ref_length_split(text: str, prompt: str = P331.prompt) -> tuple[int, int]:
    """Character scan: build segments by hand, then classify them against the problem's chain."""
    chain = ref_chain(prompt)
    segs, cur = [], ""
    for ch in text:
        if ch == ";":
            segs.append((cur, 1))
            cur = ""
        else:
            cur += ch
    segs.append((cur, 0))
    work = redundant = 0
    earlier: list[str] = []
    for seg, sep in segs:
        repeat = is_step(seg) and earlier.count(seg) >= max(chain.count(seg), 1)
        if seg[:3] == "chk" or repeat:
            redundant += len(seg) + sep
        else:
            work += len(seg) + sep
        if is_step(seg):
            earlier.append(seg)
    return work, redundant


options = st.fixed_dictionaries(
    {
        "operands": st.tuples(st.integers(2, 4), st.integers(0, 2)).map(
            lambda t: (t[0], t[0] + t[1])
        ),
        "digits": st.tuples(st.integers(1, 3), st.integers(0, 2)).map(
            lambda t: (t[0], t[0] + t[1])
        ),
    }
)


# ------------------------------------------------------------------------------ responses


def test_hand_worked_example() -> None:
    assert TASK.demonstration(P331, "terse", np.random.default_rng(0)) == "#331"
    assert (
        TASK.demonstration(P331, "worked", np.random.default_rng(0)) == "17+305=322;322+9=331;#331"
    )
    rechecked = TASK.demonstration(P331, "rechecked", np.random.default_rng(0))
    assert re.fullmatch(
        r"17\+305=322;(chk17\+305=322;)*322\+9=331;(chk322\+9=331;)*#331", rechecked
    )


@FAST
@given(options, st.integers(0, 2**31), st.sampled_from(SPLITS))
def test_every_demonstration_is_correct_and_split(opts: dict, seed: int, split: str) -> None:
    task = ArithmeticTask(**opts)
    rng = np.random.default_rng(seed)
    for problem in task.problems(split, 6, seed):
        xs = ref_operands(problem.prompt)
        assert problem.reference == str(sum(int(x) for x in xs))
        for style in task.styles:
            r = task.demonstration(problem, style, rng)
            assert task.verify(problem, r, True).correct
            assert set(r) <= set(task.alphabet)
            ls = task.length_split(problem, r)
            assert ls.work + ls.redundant == len(r)
            assert (ls.work, ls.redundant) == ref_length_split(r, problem.prompt)
            segs = r.split(";")
            checks = [s for s in segs if s.startswith("chk")]
            if style == "rechecked":
                assert 1 <= len(checks) <= 2
                assert ls.redundant == sum(len(s) + 1 for s in checks)
            else:
                assert ls.redundant == 0 and not checks
            steps = [s for s in segs[:-1] if not s.startswith("chk")]
            if style == "terse":
                assert steps == [] and r == "#" + problem.reference
                continue
            acc = int(xs[0])  # the worked steps are the running partial sums, in order
            for step, x in zip(steps, xs[1:], strict=True):
                assert step == f"{acc}+{int(x)}={acc + int(x)}"
                acc += int(x)


def test_rechecked_uses_one_or_two_checks_of_existing_steps() -> None:
    rng = np.random.default_rng(1)
    n_checks = []
    for _ in range(200):
        r = TASK.demonstration(P331, "rechecked", rng)
        segs = r.split(";")
        n_checks.append(sum(s.startswith("chk") for s in segs))
        plain = [s for s in segs if not s.startswith("chk")]
        assert ";".join(plain) == "17+305=322;322+9=331;#331"
    assert set(n_checks) == {1, 2}


@pytest.mark.parametrize(
    "response, correct, answer",
    [
        ("#331", True, "331"),
        ("junk text#331", True, "331"),
        ("#999;#331", True, "331"),  # the LAST '#' counts
        ("17+305=999;#331", True, "331"),  # steps are never graded: length is free
        ("chkzzz;chk;#331", True, "331"),
        ("#332", False, "332"),
        ("#331;#999", False, "999"),
        ("#0331", False, "0331"),
        ("#33", False, "33"),
        ("331", False, None),  # no '#'
        ("", False, None),
        ("#", False, None),
        ("#331x", False, None),  # trailing junk
        ("#331;", False, None),
        ("#331 ", False, None),
        ("#331\n", False, None),
        ("#-331", False, None),
        ("#+331", False, None),
        ("#\uff13\uff13\uff11", False, None),  # full-width digits are not ASCII digits
        ("#" + "1" * (MAX_ANSWER_CHARS + 1), False, None),  # longer than any answer
    ],
)
def test_verify_cases(response: str, correct: bool, answer: str | None) -> None:
    v = TASK.verify(P331, response, True)
    assert (v.correct, v.truncated, v.answer) == (correct, False, answer)
    assert v.correct == ref_verify("331", response, True)
    unfinished = TASK.verify(P331, response, False)
    assert (unfinished.correct, unfinished.truncated, unfinished.answer) == (False, True, None)


chars = st.sampled_from(list(TASK.alphabet) + ["x", " ", "\n", "-", "\u00b2"])


@settings(max_examples=100, deadline=None)
@given(st.text(chars, max_size=40), st.sampled_from(["", "#331", "#33", ";#331", "#331;"]))
def test_verify_and_length_split_match_references(text: str, tail: str) -> None:
    response = text + tail
    v = TASK.verify(P331, response, True)
    assert v.correct == ref_verify("331", response, True)
    assert not v.truncated and (v.answer is None or v.answer.isdigit())
    ls = TASK.length_split(P331, response)
    assert isinstance(ls, LengthSplit) and ls.work >= 0 and ls.redundant >= 0
    assert (ls.work, ls.redundant) == ref_length_split(response)


@pytest.mark.parametrize(
    "response, work, redundant",
    [
        ("17+305=322;chk17+305=322;#322", 15, 14),
        ("17+305=322;17+305=322;#322", 15, 11),  # a repeated identical step
        ("17+305=322;17+305=323;#322", 26, 0),  # a different step is work
        ("chk", 0, 3),  # last segment: no ';' to count
        (";;#1", 4, 0),
        ("abc;chk;1+2=3;1+2=3", 10, 9),
        ("1+2=3x;1+2=3x", 13, 0),  # unparseable text is work, even repeated
        ("", 0, 0),
    ],
)
def test_length_split_by_hand(response: str, work: int, redundant: int) -> None:
    assert TASK.length_split(P331, response) == LengthSplit(work, redundant)


def test_zero_operands_repeat_a_needed_step() -> None:
    zeros = Problem("i", "5+0+0=", "5", "o3d1")
    worked = TASK.demonstration(zeros, "worked", np.random.default_rng(0))
    assert worked == "5+0=5;5+0=5;#5"
    assert TASK.length_split(zeros, worked) == LengthSplit(14, 0)
    assert TASK.length_split(zeros, "5+0=5;" + worked) == LengthSplit(14, 6)
    assert TASK.length_split(zeros, "chk5+0=5;" + worked) == LengthSplit(14, 9)
    with pytest.raises(ValueError, match="not an arithmetic prompt"):
        TASK.length_split(Problem("i", "what?", "1", "x"), "#1")


@FAST
@given(st.integers(0, 2**31), st.lists(st.integers(0, 1), min_size=1, max_size=4))
def test_rechecks_add_length_not_correctness(seed: int, where: list[int]) -> None:
    rng = np.random.default_rng(seed)
    problem = TASK.problems("train", 1, seed)[0]
    worked = TASK.demonstration(problem, "worked", rng)
    segs = worked.split(";")
    steps = segs[:-1]
    added = 0
    for w in where:  # insert re-checks of existing steps at random places before the answer
        check = "chk" + steps[int(rng.integers(len(steps)))]
        pos = int(rng.integers(len(segs))) if w else len(segs) - 1
        segs.insert(pos, check)
        added += len(check) + 1
    longer = ";".join(segs)
    assert TASK.verify(problem, longer, True).correct
    base = TASK.length_split(problem, worked)
    assert TASK.length_split(problem, longer) == LengthSplit(base.work, base.redundant + added)


def test_long_garbage_is_wrong_and_fast() -> None:
    rng = np.random.default_rng(0)
    garbage = "".join(rng.choice(list(TASK.alphabet + "x "), size=1_000_000).tolist())
    cases = [
        (garbage + "x", False),
        ("#" + "3" * 1_000_000, False),
        ("#331" + "1" * 1_000_000, False),
        ("x" * 1_000_000 + "#331", True),
        ("#331;" * 200_000 + "#331", True),
    ]
    t0 = time.perf_counter()
    for response, correct in cases:
        assert TASK.verify(P331, response, True).correct is correct
        assert not TASK.verify(P331, response, False).correct
    assert time.perf_counter() - t0 < 0.2
    ls = TASK.length_split(P331, garbage)
    assert ls.work + ls.redundant == len(garbage)


def test_bad_inputs_raise() -> None:
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match="choose one of 'terse', 'worked', 'rechecked'"):
        TASK.demonstration(P331, "verbose", rng)
    with pytest.raises(ValueError, match="not an arithmetic prompt"):
        TASK.demonstration(Problem("i", "17*3=", "51", "o2d2"), "worked", rng)
    with pytest.raises(ValueError, match="not the sum"):
        TASK.demonstration(Problem("i", "1+2=", "4", "o2d1"), "worked", rng)
    with pytest.raises(ValueError, match="must be a str"):
        TASK.verify(P331, None, True)  # type: ignore[arg-type]


# ------------------------------------------------------------------------------ problems


@FAST
@given(options, st.integers(0, 2**31), st.integers(0, 40))
def test_problems_deterministic_disjoint_and_labelled(opts: dict, seed: int, n: int) -> None:
    task = ArithmeticTask(**opts)
    n = min([n] + [c for c in map(task.capacity, SPLITS) if c is not None])
    by_split = {s: task.problems(s, n, seed) for s in SPLITS}
    for split, problems in by_split.items():
        assert problems == task.problems(split, n, seed)
        assert len(problems) == n and len({p.prompt for p in problems}) == n
        for p in problems:
            xs = ref_operands(p.prompt)
            o, d = len(xs), max(len(x) for x in xs)
            assert p.difficulty == f"o{o}d{d}"
            assert opts["operands"][0] <= o <= opts["operands"][1]
            assert opts["digits"][0] <= d <= opts["digits"][1]
            assert all(x == str(int(x)) for x in xs)  # no leading zeros
            assert p.reference == str(sum(int(x) for x in xs))
            assert p.prompt_id == "arith-" + hashlib.sha1(p.prompt.encode()).hexdigest()[:16]
            assert ref_split(p.prompt) == split == split_of(p.prompt)
    prompts = [{p.prompt for p in ps} for ps in by_split.values()]
    assert all(not (a & b) for a, b in itertools.combinations(prompts, 2))


def test_seeds_differ_and_prompts_are_short() -> None:
    a, b = TASK.problems("train", 50, 0), TASK.problems("train", 50, 1)
    assert {p.prompt for p in a} != {p.prompt for p in b}
    assert max(len(p.prompt) for p in TASK.problems("eval", 150, 0)) <= 16
    assert len(set(TASK.alphabet)) == len(TASK.alphabet) and not any(
        c.isspace() for c in TASK.alphabet
    )


def test_problem_mix_is_stratified() -> None:
    mix = {"o2d1": 1.0, "o3d2": 2.0, "o4d3": 5.0, "o2d3": 0.0}
    task = ArithmeticTask(mix=mix)
    for n in (0, 1, 7, 130):
        got = [p.difficulty for p in task.problems("eval", n, 3)]
        for label in {lv.label for lv in task.levels}:
            expected = n * mix.get(label, 0.0) / 8.0
            assert abs(got.count(label) - expected) < 1, (label, n)
    uniform = [p.difficulty for p in TASK.problems("train", 90, 0)]
    assert all(uniform.count(lv.label) == 10 for lv in TASK.levels)


def test_corpus_mix_and_styles_chi_square() -> None:
    mix = {"o2d1": 1.0, "o2d2": 1.0, "o4d3": 2.0}
    task = ArithmeticTask(operands=(2, 4), digits=(1, 3), mix=mix)
    pairs = task.corpus(2000, 7)
    labels = [p.difficulty for p, _ in pairs]
    observed = np.array([labels.count(k) for k in mix])  # (3,)
    expected = 2000 * np.array(list(mix.values())) / 4.0  # (3,)
    assert stats.chisquare(observed, expected).pvalue > 1e-3
    assert len(set(labels)) == 3
    style_of = [
        "rechecked" if "chk" in r else "terse" if r.startswith("#") else "worked" for _, r in pairs
    ]
    observed = np.array([style_of.count(s) for s in task.styles])  # (3,)
    assert stats.chisquare(observed, 2000 * np.array([0.4, 0.4, 0.2])).pvalue > 1e-3
    for problem, r in pairs:
        assert task.verify(problem, r, True).correct and ref_split(problem.prompt) == "train"
    assert pairs == task.corpus(2000, 7) and pairs != task.corpus(2000, 8)
    only_terse = task.corpus(50, 0, {"terse": 1.0})
    assert all(r == "#" + p.reference for p, r in only_terse)


def test_capacity_is_exact_for_the_smallest_level() -> None:
    task = ArithmeticTask(mix={"o2d1": 1.0})
    for split in SPLITS:
        pool = {
            f"{a}+{b}=" for a in range(10) for b in range(10) if ref_split(f"{a}+{b}=") == split
        }
        assert task.capacity(split) == len(pool)
        assert {p.prompt for p in task.problems(split, len(pool), 5)} == pool
        with pytest.raises(ValueError, match=f"holds only {len(pool)} distinct"):
            task.problems(split, len(pool) + 1, 5)
    assert ArithmeticTask(digits=(2, 3)).capacity("eval") is None
    cap = TASK.capacity("eval")
    for seed in range(3):
        assert len(TASK.problems("eval", cap, seed)) == cap


# ------------------------------------------------------------------------------ registry


def test_registry() -> None:
    task = get_task("arithmetic", operands=[2, 3], digits=2, mix={"o3d2": 1})
    assert isinstance(task, Task) and isinstance(task, ArithmeticTask) and TASKS["arithmetic"]
    assert (task.operands, task.digits, task.mix) == ((2, 3), (2, 2), (("o3d2", 1.0),))
    assert get_task("arithmetic") == TASK and isinstance(hash(task), int)
    with pytest.raises(ValueError, match="unknown task 'gsm8k'; valid tasks: arithmetic"):
        get_task("gsm8k")
    with pytest.raises(ValueError, match="unknown option 'levels'.*valid options: operands"):
        get_task("arithmetic", levels=3)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"operands": (1, 3)}, "operands must satisfy 2 <= min <= max <= 6"),
        ({"operands": (3, 2)}, "operands must satisfy"),
        ({"digits": 0}, "digits must satisfy 1 <= min"),
        ({"digits": (1, 2, 3)}, "digits must be an integer or a"),
        ({"digits": 2.0}, "digits must be an integer or a"),
        ({"mix": {"o9d1": 1}}, "mix key 'o9d1' is not valid; valid levels: o2d1"),
        ({"mix": {"o2d1": -1}}, r"mix\['o2d1'\] must be a finite number >= 0"),
        ({"mix": {"o2d1": float("nan")}}, "must be a finite number"),
        ({"mix": {"o2d1": True}}, "must be a finite number"),
        ({"mix": {"o2d1": 0}}, "must give some levels a positive weight"),
        ({"mix": "o2d1"}, "mix must be a mapping"),
        ({"mix": [1, 2]}, "mix must be a mapping"),
    ],
)
def test_option_errors(kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        get_task("arithmetic", **kwargs)


def test_call_errors() -> None:
    with pytest.raises(ValueError, match="split='test' is not valid; choose one of 'train', 'eval"):
        TASK.problems("test", 3, 0)
    with pytest.raises(ValueError, match="n must be an integer >= 0"):
        TASK.problems("train", -1, 0)
    with pytest.raises(ValueError, match="seed must be an integer >= 0"):
        TASK.corpus(3, -2)
    with pytest.raises(ValueError, match="style_weights key 'long' is not valid"):
        TASK.corpus(3, 0, {"long": 1.0})
    with pytest.raises(ValueError, match="could not draw|holds only"):
        ArithmeticTask(operands=2, digits=1).problems("eval", 1000, 0)


# ------------------------------------------------------------------------------ option schema


def test_each_task_declares_its_options_from_its_own_fields() -> None:
    from dataclasses import fields

    from grpo_dial.data.tasks import task_options

    arithmetic = task_options(ArithmeticTask)
    assert [o.name for o in arithmetic] == [f.name for f in fields(ArithmeticTask)]
    assert all(o.help and not o.required for o in arithmetic)  # every field has help text
    assert [o.default for o in arithmetic] == [(2, 4), (1, 3), None, 0]  # tail_checks too
    math = {o.name: o for o in task_options(TASKS["math"])}  # a plain class: its constructor
    assert [n for n, o in math.items() if o.required] == ["train", "heldout"]
    assert math["verify_timeout"].default == 5.0


def test_a_new_field_is_an_option_without_other_changes() -> None:
    """Options are derived, so a field another engineer adds is validated automatically."""
    from dataclasses import dataclass, field

    from grpo_dial.data.tasks import task_options

    @dataclass(frozen=True)
    class Wider(ArithmeticTask):
        carries: int = field(default=0, metadata={"help": "at least this many carries"})

    assert task_options(Wider)[-1].name == "carries"
    assert task_options(Wider)[-1].help == "at least this many carries"


@pytest.mark.parametrize(
    ("name", "options", "line"),
    [
        ("arithmetic", {"operands": 9}, "config error at 'task.options.operands': operands must"),
        ("arithmetic", {"operandz": 2}, "config error at 'task.options.operandz': unknown option"),
        ("arith", {}, "config error at 'task.name': unknown task 'arith'; valid tasks"),
        ("math", {"train": []}, "config error at 'task.options': task 'math' needs option(s)"),
        ("arithmetic", [1], "config error at 'task.options': must be a mapping"),
    ],
)
def test_option_errors_are_one_config_line(name: str, options: object, line: str) -> None:
    from grpo_dial.data.tasks import option_error

    error = option_error(name, options)
    assert error is not None and error.startswith(line) and "\n" not in error, error
    assert option_error("arithmetic", {"operands": [2, 3]}) is None

"""Real math problems (GSM8K, MATH-500, Big-Math) checked by math-verify.

Options (YAML `task.options`):
    train, heldout   lists of source specs (grpo_dial.data.math_problems): {dataset, path, split, n,
                     seed, levels, subjects, sources, domains, solve_rate}
    eval             optional list of specs; None makes "eval" the heldout pool itself
    prompt_template  text with one "{problem}" (literal replacement, no other braces parsed)
    verify_timeout   seconds per answer check (a timeout is a wrong answer, counted)
    verify_memory_mb address-space limit of the checker process in MiB (0: none); a check
                     over it fails alone (an error or crash, counted)

Splits. Each split's pool is its specs' mix (`load_mix`), loaded on first use. Train never shares
a problem with heldout or eval: a train row whose problem text (whitespace collapsed, case folded)
is also in heldout or eval is removed and counted in the log; with its own specs eval drops what
heldout holds. `problems(split, n, seed)` draws n distinct problems of the pool with a seeded RNG,
in random order; n larger than the pool gives the whole pool (shuffled) with a warning.

A Problem's prompt is the template filled with the problem, its reference the dataset's final
answer, its difficulty the table's label. `verify` extracts the final answer (last \\boxed{},
else "####", "answer is", the last number) and checks it with math-verify in a worker process
(grpo_dial.data.math_reward); `verify_counts` gives the tallies. `demonstration` gives the dataset's
worked solution ending "The final answer is $\\boxed{<reference>}$." (GSM8K: the text before
"####", calculator annotations <<...>> removed; MATH: its `solution`, already boxed); Big-Math
has none. `length_split` is None: real responses carry no work / padding labels.
"""

from __future__ import annotations

import hashlib
import logging
import string
from collections.abc import Mapping, Sequence
from typing import ClassVar

import numpy as np
import pandas as pd

from grpo_dial.data.math_problems import check_spec, load_mix, normalized_problem
from grpo_dial.data.math_reward import DEFAULT_MEMORY_MB, MathVerifier
from grpo_dial.data.tasks.base import SPLITS, LengthSplit, Problem, Verdict

log = logging.getLogger("grpo_dial")

DEFAULT_TEMPLATE = (
    "{problem}\n\nPlease reason step by step, and put your final answer within \\boxed{}."
)
_SALT = 0x6D617468  # "math": keeps these RNG streams apart from other uses of the same seed


class MathTask:
    """GSM8K / MATH-500 / Big-Math mixes as a `Task`; see the module docstring."""

    name: ClassVar[str] = "math"
    styles: ClassVar[tuple[str, ...]] = ("solution",)
    alphabet: ClassVar[str] = string.printable

    def __init__(
        self,
        train: Sequence[Mapping],
        heldout: Sequence[Mapping],
        eval: Sequence[Mapping] | None = None,
        prompt_template: str = DEFAULT_TEMPLATE,
        verify_timeout: float = 5.0,
        verify_memory_mb: float = DEFAULT_MEMORY_MB,
    ) -> None:
        self.specs = {"train": _specs("train", train), "heldout": _specs("heldout", heldout)}
        if eval is not None:
            self.specs["eval"] = _specs("eval", eval)
        if not isinstance(prompt_template, str) or prompt_template.count("{problem}") != 1:
            raise ValueError(
                f"prompt_template must contain '{{problem}}' exactly once, got {prompt_template!r}"
            )
        self.prompt_template = prompt_template
        # its worker starts on first use
        self.verifier = MathVerifier(timeout=verify_timeout, memory_mb=verify_memory_mb)
        self._pools: dict[str, pd.DataFrame] | None = None
        self._solutions: dict[str, str] = {}

    # ----------------------------------------------------------------------------- pools

    def pools(self) -> dict[str, pd.DataFrame]:
        """The math tables of train, heldout and eval (loaded once, disjoint by problem text)."""
        if self._pools is None:
            loaded = {split: load_mix(specs)[0] for split, specs in self.specs.items()}
            if "eval" in loaded:
                loaded["eval"] = _without(loaded["eval"], [loaded["heldout"]], "eval")
            others = [loaded[s] for s in loaded if s != "train"]
            loaded["train"] = _without(loaded["train"], others, "train")
            loaded.setdefault("eval", loaded["heldout"])
            for table in loaded.values():
                has = table["solution"].notna()
                ids, sols = table["prompt_id"][has], table["solution"][has]
                self._solutions.update(zip(ids, sols, strict=True))
            self._pools = loaded
        return self._pools

    def problems(self, split: str, n: int, seed: int) -> list[Problem]:
        """n distinct problems of split's pool, drawn by a seeded RNG (all, with a warning, if
        the pool holds fewer)."""
        if not isinstance(split, str) or split not in SPLITS:
            raise ValueError(f"split={split!r} is not valid; choose one of {', '.join(SPLITS)}")
        for key, v in (("n", n), ("seed", seed)):
            if isinstance(v, bool) or not isinstance(v, int | np.integer) or v < 0:
                raise ValueError(f"{key} must be an integer >= 0, got {v!r}")
        pool = self.pools()[split]
        if n > len(pool):
            log.warning(
                "math task: asked for %d %s problems, the pool holds %d; using all",
                n,
                split,
                len(pool),
            )
        rng = np.random.default_rng([_SALT, int(seed), SPLITS.index(split)])
        rows = pool.iloc[rng.permutation(len(pool))[: min(n, len(pool))]]
        return [
            Problem(
                prompt_id=pid,
                prompt=self.prompt_template.replace("{problem}", text),
                reference=ref,
                difficulty=diff,
            )
            for pid, text, ref, diff in zip(
                rows["prompt_id"],
                rows["problem"],
                rows["reference"],
                rows["difficulty"],
                strict=True,
            )
        ]

    # ----------------------------------------------------------------------------- responses

    def demonstration(self, problem: Problem, style: str, rng: np.random.Generator) -> str:
        """The dataset's worked solution, ending in the boxed reference; ValueError if none."""
        if style not in self.styles:
            raise ValueError(
                f"style={style!r} is not valid; choose one of {', '.join(self.styles)}"
            )
        self.pools()
        solution = self._solutions.get(problem.prompt_id)
        if solution is None:
            raise ValueError(
                f"problem {problem.prompt_id} has no worked solution (Big-Math has none); "
                "warm-start on GSM8K or MATH sources, or start from a pretrained model"
            )
        if "\\boxed" in solution:
            return solution
        return f"{solution}\nThe final answer is $\\boxed{{{problem.reference}}}$."

    def verify(self, problem: Problem, response: str, finished: bool) -> Verdict:
        """math-verify's check of the extracted final answer; truncated, timed-out or failed
        checks are wrong, and counted (verify_counts) with unparsable references."""
        if not isinstance(response, str):
            raise ValueError(f"response must be a str, got {type(response).__name__}")
        if not finished:
            return Verdict(correct=False, truncated=True, answer=None)
        check = self.verifier.verify(response, problem.reference)
        return Verdict(correct=check.correct, truncated=False, answer=check.answer)

    def verify_counts(self) -> dict[str, int]:
        """The verifier's tallies so far: checks, correct, no_answer, timeouts, errors,
        crashes, bad_references, restarts (grpo_dial.data.math_reward.COUNT_KEYS)."""
        return self.verifier.counts

    def length_split(self, problem: Problem, response: str) -> LengthSplit | None:
        """None: a real response has no work / padding labels."""
        return None


def _specs(split: str, specs: object) -> tuple[dict, ...]:
    if isinstance(specs, Mapping) or not isinstance(specs, Sequence) or isinstance(specs, str):
        raise ValueError(
            f"math task option {split!r} must be a list of source specs, got {specs!r}"
        )
    if not specs:
        raise ValueError(f"math task option {split!r} needs at least one source spec")
    return tuple(check_spec(s) for s in specs)


def _key(text: str) -> str:
    return hashlib.sha1(normalized_problem(text).encode("utf-8")).hexdigest()


def _without(table: pd.DataFrame, others: list[pd.DataFrame], split: str) -> pd.DataFrame:
    """table minus the rows whose normalized problem text appears in any of `others`."""
    taken = {_key(t) for other in others for t in other["problem"]}
    clash = table["problem"].map(lambda t: _key(t) in taken).to_numpy(dtype=bool)
    if clash.any():
        log.info("math task: removed %d %s problems that another split holds", clash.sum(), split)
    return table[~clash].reset_index(drop=True)

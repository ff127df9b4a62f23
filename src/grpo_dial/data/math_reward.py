"""Math reward: extract a response's final answer, check it with math-verify under a time limit.

Extraction (`extract_answer`, plain string handling, bounded work, never evaluated):
  1. the content of the LAST `\\boxed{...}` (or `\\fbox{...}`, balanced braces; `\\boxed 5`);
  2. else GSM8K's convention: the value after the last "####" on its line;
  3. else the value after the last "answer is" / "answer:" (case-insensitive) on its line;
  4. else the last number in the response ("1,000", "-3.5", "2/3").
In 2 and 3 the value is the first `$...$` span of the fragment, else its first number, else the
fragment itself (up to the end of the sentence). Thousands separators ("1,000") are removed from
numbers. An answer longer than MAX_ANSWER_CHARS counts as no answer.

Checking (`math_verify_check`): parse("\\boxed{reference}") and parse("\\boxed{answer}") with
math-verify, then verify(gold, answer), so 1/2 = 0.5 = \\frac{1}{2}, 1,000 = 1000, x = 5 ~ 5.
math-verify's own time limit uses SIGALRM, which only works in the main thread: it is disabled,
and every check instead runs in a persistent worker process (`python -m grpo_dial.data.math_reward`,
JSON lines over pipes: no pickle, no eval). The caller waits at most `timeout` seconds for the
answer; on timeout the worker is killed and a fresh one started, and the check counts as wrong.
A checker exception (status error) or a worker that died mid-check (status crash, e.g. over its
memory limit) also counts as wrong. A reference math-verify cannot parse (status bad_reference)
is reported once per reference in the log and tallied, not silently scored: the response scores
0 because nothing can be checked against it. The worker runs under an address-space limit
(`resource.setrlimit(RLIMIT_AS)`, `memory_mb`, default DEFAULT_MEMORY_MB), so a check that would
eat the machine's memory fails alone. `MathVerifier.counts` holds the tallies (COUNT_KEYS);
grpo_dial.train.guard books them per training step. Calls from any thread are serialized by
a lock. The worker starts on first use; its cost per check: docs/real-data-and-gpu.md.
"""

from __future__ import annotations

import importlib
import json
import logging
import os
import re
import selectors
import subprocess
import sys
import threading
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass

log = logging.getLogger("grpo_dial")

MAX_ANSWER_CHARS = 1000
DEFAULT_CHECKER = "grpo_dial.data.math_reward:math_verify_check"
STARTUP_TIMEOUT = 300.0  # seconds for a worker to import math-verify (slow shared machines)
DEFAULT_MEMORY_MB = 4096  # the worker's address-space limit, in MiB
STATUS_COUNT = {  # Check.status -> its tally
    "no_answer": "no_answer", "timeout": "timeouts", "error": "errors", "crash": "crashes",
    "bad_reference": "bad_references",
}  # fmt: skip
COUNT_KEYS = ("checks", "correct", *STATUS_COUNT.values(), "restarts")


class BadReference(ValueError):
    """A checker's verdict that the reference itself cannot be read (not the answer's fault)."""

_BOX = re.compile(r"\\(?:boxed|fbox)")
_HASHES = re.compile(r"####[ \t]*([^\n]*)")
_ANSWER_IS = re.compile(r"answer(?:\s+is|\s*:)[ \t:]*([^\n]*)", re.IGNORECASE)
_NUMBER = re.compile(r"-?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:/\d+)?")
_MATH_SPAN = re.compile(r"\$+([^$]+)\$+")
_SENTENCE_END = re.compile(r"\.(?:\s|$)")


# --------------------------------------------------------------------------- extraction


def _boxed(response: str) -> str | None:
    """Content of the last \\boxed{...} / \\fbox{...} with balanced braces, else None."""
    for m in reversed(list(_BOX.finditer(response))[-8:]):  # bounded work on unbalanced boxes
        i = m.end()
        while i < len(response) and response[i] == " ":
            i += 1
        if i < len(response) and response[i] == "{":
            depth = 0
            for j in range(i, len(response)):
                depth += {"{": 1, "}": -1}.get(response[j], 0)
                if depth == 0:
                    return response[i + 1 : j].strip()
        elif i > m.end():  # "\boxed 5": the token after the space
            token = re.match(r"[^\s$]+", response[i:])
            if token:
                return token.group(0)
    return None


def _number(text: str) -> str:
    return text.replace(",", "")


def _value(fragment: str) -> str:
    """The first $...$ span, else the first number, else the fragment up to a sentence end."""
    if span := _MATH_SPAN.search(fragment):
        return span.group(1).strip()
    if num := _NUMBER.search(fragment):
        return _number(num.group(0))
    end = _SENTENCE_END.search(fragment)
    return fragment[: end.start() if end else len(fragment)].strip()


def extract_answer(response: str) -> tuple[str | None, str]:
    """(answer, how): how is boxed, hashes, answer_is, last_number or none (answer None)."""
    if not isinstance(response, str):
        raise ValueError(f"response must be a str, got {type(response).__name__}")
    found: tuple[str | None, str] = (None, "none")
    if (box := _boxed(response)) is not None:
        found = (box, "boxed")
    elif hashes := _HASHES.findall(response):
        found = (_value(hashes[-1]), "hashes")
    elif said := _ANSWER_IS.findall(response):
        found = (_value(said[-1]), "answer_is")
    elif numbers := _NUMBER.findall(response[-4 * MAX_ANSWER_CHARS :]):
        found = (_number(numbers[-1]), "last_number")
    answer, how = found
    if answer is None or not answer or len(answer) > MAX_ANSWER_CHARS:
        return None, "none"
    return answer, how


# --------------------------------------------------------------------------- the checker


def _parse(text: str):
    from math_verify import parse

    return parse("\\boxed{" + text + "}", parsing_timeout=None, raise_on_error=True)


_gold_cache: dict[str, object] = {}


def math_verify_check(answer: str, reference: str) -> bool:
    """math-verify's verdict on answer against reference, both parsed as \\boxed{} content.

    Runs in the worker process, without math-verify's SIGALRM timeout (the caller enforces one).
    The parsed reference is cached (a training step checks many responses per problem); one
    that yields no expression (only its raw text, e.g. "\\frac{") raises BadReference.
    """
    from math_verify import verify

    if reference not in _gold_cache:
        if len(_gold_cache) > 4096:
            _gold_cache.clear()
        try:
            _gold_cache[reference] = _parse(reference)
        except Exception as exc:  # noqa: BLE001 - any parser failure means the same here
            _gold_cache[reference] = BadReference(f"{type(exc).__name__}: {exc}")
        if all(isinstance(x, str) for x in _gold_cache[reference]):  # [] or the raw text only
            _gold_cache[reference] = BadReference("math-verify finds no expression in it")
    if isinstance(_gold_cache[reference], BadReference):
        raise _gold_cache[reference]
    return bool(
        verify(_gold_cache[reference], _parse(answer), timeout_seconds=None, raise_on_error=True)
    )


def _load_checker(spec: str) -> Callable[[str, str], bool]:
    module, _, name = spec.partition(":")
    fn = getattr(importlib.import_module(module), name, None)
    if not callable(fn):
        raise ValueError(f"checker {spec!r} is not a callable 'module:function'")
    return fn


def _limit_memory(memory_mb: float) -> None:
    """Cap this process's address space at memory_mb MiB (0: no cap; never above the hard cap)."""
    import resource

    hard = resource.getrlimit(resource.RLIMIT_AS)[1]
    if memory_mb > 0:
        limit = int(memory_mb * 2**20)
        resource.setrlimit(resource.RLIMIT_AS, (min(limit, hard) if hard >= 0 else limit, hard))


def _serve(spec: str = DEFAULT_CHECKER, memory_mb: float = DEFAULT_MEMORY_MB) -> None:
    """Worker loop: one JSON request {"a", "r"} per stdin line -> one JSON reply per stdout line."""
    out, sys.stdout = sys.stdout, sys.stderr  # stray prints cannot corrupt the reply stream
    _limit_memory(memory_mb)
    logging.getLogger("math_verify").setLevel(logging.ERROR)
    logging.getLogger("latex2sympy2_extended").setLevel(logging.ERROR)
    # the class as checkers raise it (this file runs as __main__, a different module object)
    bad_reference = importlib.import_module("grpo_dial.data.math_reward").BadReference
    try:
        check = _load_checker(spec)
        if spec == DEFAULT_CHECKER:
            check("1", "1")  # import math-verify and warm it before reporting ready
    except Exception as exc:  # reported to the parent, which raises it
        out.write(json.dumps({"fatal": f"{type(exc).__name__}: {exc}"}) + "\n")
        out.flush()
        return
    out.write(json.dumps({"ready": True}) + "\n")
    out.flush()
    for line in sys.stdin:
        try:
            req = json.loads(line)
            reply = {"ok": bool(check(req["a"], req["r"]))}
        except bad_reference as exc:
            reply = {"bad_reference": str(exc)[:300]}
        except Exception as exc:  # a checker error is a wrong answer, reported and counted
            reply = {"error": f"{type(exc).__name__}: {exc}"[:300]}
        out.write(json.dumps(reply) + "\n")
        out.flush()


# --------------------------------------------------------------------------- the caller side

_ENDED = {"error": "checker process ended"}  # readline's reply when the worker's output closed


@dataclass(frozen=True)
class Check:
    """One response's result: correct, the extracted answer, and status.

    status: ok (checked), no_answer (nothing extracted), timeout, error (the checker raised),
    crash (its process died), bad_reference (the reference cannot be parsed).
    """

    correct: bool
    answer: str | None
    status: str


class _Worker:
    """A checker process and a line reader with a deadline."""

    def __init__(self, checker: str, memory_mb: float) -> None:
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)  # what the caller imports
        env["PYTHONUNBUFFERED"] = "1"
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "grpo_dial.data.math_reward", checker, str(memory_mb)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=env,
        )
        self._finalizer = weakref.finalize(self, _kill, self.proc)
        self._buf = b""
        self._sel = selectors.DefaultSelector()
        self._sel.register(self.proc.stdout, selectors.EVENT_READ)
        self.ready = False

    def readline(self, timeout: float) -> dict | None:
        """The next reply (a JSON object line; other lines skipped), _ENDED when the process
        closed its output, None on timeout."""
        deadline = time.monotonic() + timeout
        fd = self.proc.stdout.fileno()
        while True:
            while b"\n" not in self._buf:
                left = deadline - time.monotonic()
                if left <= 0 or not self._sel.select(left):
                    return None
                chunk = os.read(fd, 65536)
                if not chunk:
                    return _ENDED
                self._buf += chunk
            line, _, self._buf = self._buf.partition(b"\n")
            try:
                reply = json.loads(line)
            except ValueError:
                continue
            if isinstance(reply, dict):
                return reply

    def send(self, answer: str, reference: str) -> bool:
        try:
            self.proc.stdin.write((json.dumps({"a": answer, "r": reference}) + "\n").encode())
            self.proc.stdin.flush()
            return True
        except (BrokenPipeError, OSError):
            return False

    def close(self) -> None:
        self._sel.close()
        self._finalizer()


def _kill(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.kill()
    proc.wait()
    for stream in (proc.stdin, proc.stdout):
        try:
            stream.close()
        except OSError:
            pass


class MathVerifier:
    """Answer checks in a persistent worker process with a per-check wall-clock limit.

    `checker` names a `module:function(answer, reference) -> bool` run in the worker (default
    math-verify), under an address-space limit of `memory_mb` MiB (0: none). The worker starts on
    the first check. Thread-safe; `close()` ends the worker.
    """

    def __init__(
        self,
        timeout: float = 5.0,
        checker: str = DEFAULT_CHECKER,
        memory_mb: float = DEFAULT_MEMORY_MB,
    ) -> None:
        if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not timeout > 0:
            raise ValueError(f"verify timeout must be a number of seconds > 0, got {timeout!r}")
        if isinstance(memory_mb, bool) or not isinstance(memory_mb, int | float) or memory_mb < 0:
            raise ValueError(f"verify memory_mb must be a number >= 0, got {memory_mb!r}")
        self.memory_mb = float(memory_mb)
        self._bad_logged: set[str] = set()
        if not isinstance(checker, str) or ":" not in checker:
            raise ValueError(f"checker must be 'module:function', got {checker!r}")
        self.timeout = float(timeout)
        self.checker = checker
        self._counts = dict.fromkeys(COUNT_KEYS, 0)
        self._lock = threading.Lock()
        self._worker: _Worker | None = None

    @property
    def counts(self) -> dict[str, int]:
        """A snapshot of the tallies (COUNT_KEYS)."""
        with self._lock:
            return dict(self._counts)

    def _ready_worker(self) -> _Worker:
        if self._worker is None:
            self._worker = _Worker(self.checker, self.memory_mb)
        w = self._worker
        if not w.ready:
            msg = w.readline(STARTUP_TIMEOUT)
            if not msg or "ready" not in msg:
                self._drop_worker(restart=False)
                why = (msg.get("fatal") or msg["error"]) if msg else "no reply in time"
                raise RuntimeError(f"math answer checker {self.checker!r} did not start: {why}")
            w.ready = True
        return w

    def _drop_worker(self, restart: bool) -> None:
        if self._worker is not None:
            self._worker.close()
        # a restarted worker warms up while we continue
        self._worker = _Worker(self.checker, self.memory_mb) if restart else None
        self._counts["restarts"] += int(restart)

    def check_answer(self, answer: str, reference: str) -> Check:
        """Is `answer` equivalent to `reference`? Timeouts, checker errors and crashes count as
        wrong; an unparsable reference is status bad_reference (logged once per reference)."""
        with self._lock:
            self._counts["checks"] += 1
            w = self._ready_worker()
            reply = w.readline(self.timeout) if w.send(answer, reference) else _ENDED
            if reply is None or reply is _ENDED:
                status = "timeout" if reply is None else "crash"
                self._drop_worker(restart=True)
                why = "ran over the limit" if reply is None else "checker process died"
                log.warning("math check %s (counted as wrong): answer %.60r", why, answer)
            elif "bad_reference" in reply:
                status = "bad_reference"
                if reference not in self._bad_logged and len(self._bad_logged) < 1000:
                    self._bad_logged.add(reference)
                    log.warning(
                        "math reference %.80r cannot be checked against (%s); its responses "
                        "score 0 and are counted as bad_references",
                        reference,
                        reply["bad_reference"],
                    )
            elif "error" in reply:
                status = "error"
                log.warning("math check error (counted as wrong): %s", reply["error"])
            else:
                status = "ok"
            correct = status == "ok" and reply.get("ok") is True
            if status != "ok":
                self._counts[STATUS_COUNT[status]] += 1
            self._counts["correct"] += correct
            return Check(correct=correct, answer=answer, status=status)

    def verify(self, response: str, reference: str) -> Check:
        """Extract the response's final answer (`extract_answer`) and check it."""
        answer, _ = extract_answer(response)
        if answer is None:
            with self._lock:
                self._counts["checks"] += 1
                self._counts["no_answer"] += 1
            return Check(correct=False, answer=None, status="no_answer")
        return self.check_answer(answer, reference)

    def close(self) -> None:
        """End the worker process (a later check starts a new one)."""
        with self._lock:
            self._drop_worker(restart=False)


if __name__ == "__main__":
    _serve(*sys.argv[1:2], *map(float, sys.argv[2:3]))

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
A checker exception or a dead worker also counts as wrong. `MathVerifier.counts` holds the tallies
(checks, correct, no_answer, timeouts, errors, restarts). Calls from any thread are serialized by
a lock. Cost, on 2 shared CPU cores: about 1.3 ms per warm check, the same as math-verify called
in-process (the pipe adds well under 0.1 ms); the worker starts in about 0.7 s on first use.
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
COUNT_KEYS = ("checks", "correct", "no_answer", "timeouts", "errors", "restarts")

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
    The parsed reference is cached (a training step checks many responses per problem).
    """
    from math_verify import verify

    if reference not in _gold_cache:
        if len(_gold_cache) > 4096:
            _gold_cache.clear()
        _gold_cache[reference] = _parse(reference)
    return bool(
        verify(_gold_cache[reference], _parse(answer), timeout_seconds=None, raise_on_error=True)
    )


def _load_checker(spec: str) -> Callable[[str, str], bool]:
    module, _, name = spec.partition(":")
    fn = getattr(importlib.import_module(module), name, None)
    if not callable(fn):
        raise ValueError(f"checker {spec!r} is not a callable 'module:function'")
    return fn


def _serve(spec: str) -> None:
    """Worker loop: one JSON request {"a", "r"} per stdin line -> one JSON reply per stdout line."""
    out, sys.stdout = sys.stdout, sys.stderr  # stray prints cannot corrupt the reply stream
    logging.getLogger("math_verify").setLevel(logging.ERROR)
    logging.getLogger("latex2sympy2_extended").setLevel(logging.ERROR)
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
        except Exception as exc:  # a checker error is a wrong answer, reported and counted
            reply = {"error": f"{type(exc).__name__}: {exc}"[:300]}
        out.write(json.dumps(reply) + "\n")
        out.flush()


# --------------------------------------------------------------------------- the caller side

_ENDED = {"error": "checker process ended"}  # readline's reply when the worker's output closed


@dataclass(frozen=True)
class Check:
    """One response's result: correct, the extracted answer, and status.

    status: ok (checked), no_answer (nothing extracted), timeout, error.
    """

    correct: bool
    answer: str | None
    status: str


class _Worker:
    """A checker process and a line reader with a deadline."""

    def __init__(self, checker: str) -> None:
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)  # what the caller imports
        env["PYTHONUNBUFFERED"] = "1"
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "grpo_dial.data.math_reward", checker],
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
    math-verify). The worker starts on the first check. Thread-safe; `close()` ends the worker.
    """

    def __init__(self, timeout: float = 5.0, checker: str = DEFAULT_CHECKER) -> None:
        if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not timeout > 0:
            raise ValueError(f"verify timeout must be a number of seconds > 0, got {timeout!r}")
        if not isinstance(checker, str) or ":" not in checker:
            raise ValueError(f"checker must be 'module:function', got {checker!r}")
        self.timeout = float(timeout)
        self.checker = checker
        self._counts = dict.fromkeys(COUNT_KEYS, 0)
        self._lock = threading.Lock()
        self._worker: _Worker | None = None

    @property
    def counts(self) -> dict[str, int]:
        """A snapshot of the tallies: checks, correct, no_answer, timeouts, errors, restarts."""
        with self._lock:
            return dict(self._counts)

    def _ready_worker(self) -> _Worker:
        if self._worker is None:
            self._worker = _Worker(self.checker)
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
        self._worker = _Worker(self.checker) if restart else None  # warms up while we continue
        self._counts["restarts"] += int(restart)

    def check_answer(self, answer: str, reference: str) -> Check:
        """Is `answer` equivalent to `reference`? Timeouts and checker errors count as wrong."""
        with self._lock:
            self._counts["checks"] += 1
            w = self._ready_worker()
            reply = w.readline(self.timeout) if w.send(answer, reference) else _ENDED
            if reply is None or reply is _ENDED:
                status = "timeout" if reply is None else "error"
                self._drop_worker(restart=True)
                why = "ran over the limit" if reply is None else "checker process ended"
                log.warning("math check %s (counted as wrong): answer %.60r", why, answer)
            elif "error" in reply:
                status = "error"
                log.warning("math check error (counted as wrong): %s", reply["error"])
            else:
                status = "ok"
            correct = status == "ok" and reply.get("ok") is True
            self._counts["timeouts" if status == "timeout" else "errors"] += status != "ok"
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
    _serve(sys.argv[1] if len(sys.argv) > 1 else DEFAULT_CHECKER)

"""What the workflow decides when Snakemake builds the DAG, before any job runs.

`workflow/rules/common.smk` is glue: it calls these modules once and hands their answers to the
rules. Here: the config's one validation pass (`schema`), where each input comes from and what
the hub and offline policy allow (`inputs`), each arm resolved once (`arms`), and everything the
rules read, built in one call (`plan`). Standard library, numpy and pandas only (through
grpo_dial.data), never torch: a DAG build must stay fast. Every problem is a ConfigError with
one line naming the key.
"""

from __future__ import annotations

import re

SHOWN_CHARS = 200  # the most characters of one value (a run without spaces) an error line echoes
MAX_LINE = 1000  # the most characters of one error line
# a run longer than a value `cut` already shortened (SHOWN_CHARS, '...' and quotes) is cut again
_LONG_RUN = re.compile(rf"\S{{{SHOWN_CHARS + 9},}}")


def cut(text: str, limit: int = SHOWN_CHARS) -> str:
    """`text`, cut to `limit` characters with an ellipsis and its full length when longer."""
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} characters)"


def one_line(text: str) -> str:
    """`text` as one readable line: each control character written as its escape (a newline as
    the two characters \\n), each run of more than SHOWN_CHARS + 8 characters without a space cut
    by `cut` (a value echoed whole, wherever the line was made), and the line cut at MAX_LINE."""
    text = "".join(
        c.encode("unicode_escape").decode("ascii") if ord(c) < 32 or ord(c) == 127 else c
        for c in text
    )
    return cut(_LONG_RUN.sub(lambda run: cut(run[0]), text), MAX_LINE)


class ConfigError(ValueError):
    """A config problem, as one line naming the key (the workflow shows it as a WorkflowError);
    the message is made one line by `one_line` whatever it echoes."""

    def __init__(self, message: object) -> None:
        super().__init__(one_line(str(message)))


def fail(where: str, message: str) -> None:
    """Raise the one-line error of a key: config error at '<where>': <message>."""
    raise ConfigError(f"config error at '{where}': {message}")

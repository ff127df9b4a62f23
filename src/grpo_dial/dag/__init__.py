"""What the workflow decides when Snakemake builds the DAG, before any job runs.

`workflow/rules/common.smk` is glue: it calls these modules once and hands their answers to the
rules. Here: the config's one validation pass (`schema`), where each input comes from and what
the hub and offline policy allow (`inputs`), each arm resolved once (`arms`), and everything the
rules read, built in one call (`plan`). Standard library, numpy and pandas only (through
grpo_dial.data), never torch: a DAG build must stay fast. Every problem is a ConfigError with
one line naming the key.
"""

from __future__ import annotations


class ConfigError(ValueError):
    """A config problem, as one line naming the key (the workflow shows it as a WorkflowError)."""


def fail(where: str, message: str) -> None:
    """Raise the one-line error of a key: config error at '<where>': <message>."""
    raise ConfigError(f"config error at '{where}': {message}")

"""Math prompt tables: a source spec (GSM8K, MATH-500 or Big-Math) or a mix of them as one table.

The table's schema is data/prompt_table.py; each dataset's reader and adapter is its own module
(gsm8k.py, math500.py, bigmath.py); ids follow data/ids.py, so a problem has the same prompt_id
here as in the pass-rate tables.

A source spec is a mapping: `dataset` (gsm8k | math500 | bigmath), exactly one of `path` (a local
.jsonl / .json / .parquet file, or a directory holding `<split>.<ext>`; Big-Math: every parquet
file below it; a missing path is a one-line error, never a download) and `hub` (a hub id read with
`datasets.load_dataset`: the only way a spec reaches the network), `split`, and optionally `n`
and `seed` (a seeded subsample of n rows, all rows with a warning when fewer remain) and the
dataset's filters:
math500 `levels` (ints 1-5) and `subjects`; bigmath `sources`, `domains` (an entry equal to, or
below in the "A -> B" hierarchy, a listed one) and `solve_rate` [lo, hi] (inclusive; rows with a
null rate are dropped when it is given). Rows with a missing or empty problem or answer, and
repeats of a problem text, are dropped and counted in the LoadReport and the log.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from grpo_dial.data.bigmath import bigmath_problems, read_bigmath
from grpo_dial.data.gsm8k import gsm8k_problems
from grpo_dial.data.ids import PREFIX, problem_ids
from grpo_dial.data.math500 import math500_problems
from grpo_dial.data.prompt_table import MATH_COLUMNS, present, validate_math_table
from grpo_dial.data.reading import LoadReport, read_rows
from grpo_dial.data.sources import (
    DATA_SUFFIXES,
    HUB_DEFAULTS,
    check_hub_id,
    hub_failure,
    local_path,
)

log = logging.getLogger("grpo_dial")

DATASETS = ("gsm8k", "math500", "bigmath")
DEFAULT_SPLIT = {"gsm8k": "train", "math500": "test", "bigmath": "train"}
COMMON_KEYS = ("dataset", "path", "hub", "split", "n", "seed")
FILTER_KEYS = {
    "gsm8k": (),
    "math500": ("levels", "subjects"),
    "bigmath": ("sources", "domains", "solve_rate"),
}


# --------------------------------------------------------------------------- reading


def _read_raw(dataset: str, spec: Mapping, report: LoadReport) -> pd.DataFrame:
    """The raw rows of the spec's local file / directory, or of its hub id (`load_dataset`)."""
    split = spec["split"]
    if spec.get("hub") is not None:
        return _read_hub(dataset, spec["hub"], split, report)
    local = local_path(spec["path"], f"{dataset} data")
    if local.is_dir():
        found = [local / f"{split}{s}" for s in DATA_SUFFIXES if (local / f"{split}{s}").is_file()]
        if not found:
            raise ValueError(f"no {split}.jsonl, {split}.json or {split}.parquet in {local}")
        local = found[0]
    return read_rows(local, report)


def _read_hub(dataset: str, hub: str, split: str, report: LoadReport) -> pd.DataFrame:
    import datasets  # heavy import, only for an explicit hub id

    config = HUB_DEFAULTS[dataset][1] if hub == HUB_DEFAULTS[dataset][0] else None
    args = (hub, config) if config else (hub,)
    try:
        table = datasets.load_dataset(*args, split=split).with_format("arrow")[:]
    except Exception as exc:  # network, unknown id or split, offline cache miss: one line
        raise ValueError(f"{dataset}: {hub_failure(hub, exc)}") from None
    report.n_read = table.num_rows
    return table.to_pandas()


# --------------------------------------------------------------------------- specs


def _int_list(name: str, v: object, lo: int, hi: int) -> list[int]:
    items = [v] if isinstance(v, int) else v
    if not (
        isinstance(items, list | tuple)
        and items
        and all(isinstance(x, int) and not isinstance(x, bool) and lo <= x <= hi for x in items)
    ):
        raise ValueError(f"{name} must be a non-empty list of integers in {lo}..{hi}, got {v!r}")
    return list(items)


def _str_list(name: str, v: object) -> list[str]:
    items = [v] if isinstance(v, str) else v
    if not (isinstance(items, list | tuple) and items and all(isinstance(x, str) for x in items)):
        raise ValueError(f"{name} must be a non-empty list of strings, got {v!r}")
    return list(items)


def _band(v: object) -> tuple[float, float]:
    ok = isinstance(v, list | tuple) and len(v) == 2
    ok = ok and all(isinstance(x, int | float) and not isinstance(x, bool) for x in v)
    if not (ok and 0 <= v[0] <= v[1] <= 1):  # type: ignore[index]
        raise ValueError(f"solve_rate must be [lo, hi] with 0 <= lo <= hi <= 1, got {v!r}")
    return float(v[0]), float(v[1])  # type: ignore[index]


_FILTER_CHECKS = {
    "levels": lambda v: _int_list("levels", v, 1, 5),
    "subjects": lambda v: _str_list("subjects", v),
    "sources": lambda v: _str_list("sources", v),
    "domains": lambda v: _str_list("domains", v),
    "solve_rate": _band,
}


def check_spec(spec: object) -> dict:
    """The spec as a dict with defaults filled in; a one-line ValueError on any bad key or value."""
    if not isinstance(spec, Mapping):
        raise ValueError(f"a math source spec must be a mapping, got {spec!r}")
    dataset = spec.get("dataset")
    if dataset not in DATASETS:
        raise ValueError(
            f"math source spec: dataset must be one of {', '.join(DATASETS)}, got {dataset!r}"
        )
    valid = COMMON_KEYS + FILTER_KEYS[dataset]
    if unknown := sorted(set(spec) - set(valid)):
        hint = (  # the workflow (or data.public.with_public_paths) turns public: into a path
            "; public: <name> is resolved by the workflow" if "public" in unknown else ""
        )
        raise ValueError(
            f"unknown key(s) {', '.join(map(str, unknown))} in {dataset} spec; "
            f"valid: {', '.join(valid)}{hint}"
        )
    if ("path" in spec) == ("hub" in spec):
        raise ValueError(
            f"{dataset} spec needs exactly one of 'path' (a local file or directory) and 'hub' "
            f"(a hub id, e.g. hub: {HUB_DEFAULTS[dataset][0]})"
        )
    out = {"split": DEFAULT_SPLIT[dataset], "n": None}
    out.update(spec)
    out.setdefault("seed", 0)
    if "hub" in out:
        check_hub_id(out["hub"], f"{dataset} spec")
    for key in ("path", "split"):
        if key in out and (not isinstance(out[key], str) or not out[key]):
            raise ValueError(f"{dataset} spec: {key} must be a non-empty string, got {out[key]!r}")
    for key, lo in (("n", 1), ("seed", 0)):
        v = out[key]
        if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < lo):
            raise ValueError(f"{dataset} spec: {key} must be an integer >= {lo}, got {v!r}")
    return out


def _name(spec: Mapping) -> str:
    if "hub" in spec:
        return f"{spec['dataset']}:hub:{spec['hub']}:{spec['split']}"
    local_file = Path(spec["path"]).is_file()
    return f"{spec['dataset']}:{spec['path']}" + ("" if local_file else f":{spec['split']}")


def _log_report(report: LoadReport) -> None:
    for reason, count in report.dropped.items():
        log.info(
            "dropped %d of %d rows of %s: %s",
            count,
            report.n_read,
            report.name,
            reason.replace("_", " "),
        )


# --------------------------------------------------------------------------- tables


def _adapted(spec: Mapping, report: LoadReport) -> tuple[pd.DataFrame, np.ndarray]:
    """The spec's rows as prompt-table rows (prompt_table.ADAPTED_COLUMNS) and the filter mask."""
    dataset = spec["dataset"]
    filters = {k: _FILTER_CHECKS[k](spec[k]) for k in FILTER_KEYS[dataset] if k in spec}
    if dataset == "bigmath":
        if "hub" in spec:
            raw = read_bigmath(spec["hub"], spec["split"])
        else:
            raw = read_bigmath(str(local_path(spec["path"], "bigmath data")), spec["split"])
        report.n_read = raw.num_rows
        return bigmath_problems(raw, **filters)
    df = _read_raw(dataset, spec, report)
    if dataset == "gsm8k":
        return gsm8k_problems(df)
    return math500_problems(df, **filters)


def load_source(spec: Mapping) -> tuple[pd.DataFrame, LoadReport]:
    """One source spec (see the module docstring) as a math prompt table and its LoadReport.

    Drop reasons, each row under its first: invalid_json, missing_problem, missing_answer,
    filtered_out (the dataset's filters), duplicate_problem (a repeated problem text, first kept),
    subsample (rows beyond `n`).
    """
    spec = check_spec(spec)
    report = LoadReport(name=_name(spec))
    table, passes = _adapted(spec, report)
    steps = [
        ("missing_problem", present(table["problem"])),
        ("missing_answer", present(table["reference"])),
        ("filtered_out", passes),
    ]
    keep = np.ones(len(table), bool)
    for reason, ok in steps:
        report.drop(reason, int((keep & ~ok).sum()))
        keep &= ok
    table = table[keep].reset_index(drop=True)
    ids = problem_ids(table.pop("id_text"), PREFIX[spec["dataset"]])
    table.insert(0, "prompt_id", ids)
    dup = table["problem"].duplicated().to_numpy()
    report.drop("duplicate_problem", int(dup.sum()))
    table = table[~dup]
    table = _subsample(table, spec["n"], spec["seed"], report)
    table = validate_math_table(table)
    report.n_kept = len(table)
    _log_report(report)
    return table, report


def _subsample(df: pd.DataFrame, n: int | None, seed: int, report: LoadReport) -> pd.DataFrame:
    """n rows drawn without replacement by a seeded RNG, in their original order."""
    if n is None:
        return df
    if n > len(df):
        log.warning(
            "%s: asked for n=%d rows, only %d available; using all", report.name, n, len(df)
        )
        return df
    take = np.sort(np.random.default_rng(seed).choice(len(df), size=n, replace=False))  # (n,)
    report.drop("subsample", len(df) - n)
    return df.iloc[take]


def load_mix(specs: Sequence[Mapping]) -> tuple[pd.DataFrame, list[LoadReport]]:
    """Several source specs concatenated in order; a prompt_id seen in an earlier spec is dropped.

    The dropped repeats are counted as duplicate_problem in the later spec's report.
    """
    if isinstance(specs, Mapping) or not isinstance(specs, Sequence) or not specs:
        raise ValueError(f"a math mix must be a non-empty list of source specs, got {specs!r}")
    tables, reports = [], []
    seen: set[str] = set()
    for spec in specs:
        table, report = load_source(spec)
        repeat = table["prompt_id"].isin(seen).to_numpy()
        if repeat.any():
            report.drop("duplicate_problem", int(repeat.sum()))
            report.n_kept -= int(repeat.sum())
            log.info(
                "dropped %d rows of %s: already in an earlier source", repeat.sum(), report.name
            )
        seen.update(table["prompt_id"])
        tables.append(table[~repeat])
        reports.append(report)
    return validate_math_table(pd.concat(tables, ignore_index=True)), reports


def normalized_problem(text: str) -> str:
    """The problem text with whitespace runs collapsed and case folded, for overlap checks."""
    return " ".join(text.split()).casefold()


__all__ = [
    "DATASETS",
    "MATH_COLUMNS",
    "check_spec",
    "load_mix",
    "load_source",
    "normalized_problem",
    "validate_math_table",
]

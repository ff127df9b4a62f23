"""Math prompt tables: GSM8K, MATH-500 and Big-Math adapters into one tidy schema, and mixes.

One row per problem:

    prompt_id        str    "<dataset>-" + first 16 hex of sha1(problem text): gsm8k-, math-
                            (the pass-rate tables' ids for the same texts), bigmath-
    problem          str    the problem statement
    reference        str    the final answer (GSM8K: text after "####", commas removed)
    source           str    "gsm8k", "math500", or Big-Math's own `source` column
    difficulty       str    "gsm8k"; "level1".."level5" (MATH); Big-Math: the solve-rate band
                            of BIGMATH_BANDS holding llama8b_solve_rate ("sr0.2-0.4"), "unknown"
    prior_pass_rate  float  Big-Math's llama8b_solve_rate, NaN where unknown
    solution         str/NA the dataset's worked solution (GSM8K's text before "####", MATH's
                            `solution`); NA for Big-Math

A source spec is a mapping: `dataset` (gsm8k | math500 | bigmath), `path` (local .jsonl / .json
/ .parquet file, a directory holding `<split>.<ext>` (Big-Math: every parquet file below it), or a
hub id read with `datasets.load_dataset`), `split`, and optionally `n` and `seed` (a seeded
subsample of n rows, all rows with a warning when fewer remain) and the dataset's filters:
math500 `levels` (ints 1-5) and `subjects`; bigmath `sources`, `domains` (an entry equal to, or
below in the "A -> B" hierarchy, a listed one) and `solve_rate` [lo, hi] (inclusive; rows with a
null rate are dropped when it is given). Rows with a missing or empty problem or answer, and
repeats of a problem text, are dropped and counted in the LoadReport and the log.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from grpo_dial.passrates.tables import (
    HUB_ID,
    LoadReport,
    _domain_hit,
    _read_bigmath_arrow,
    _read_jsonl,
    _stable_ids,
)

log = logging.getLogger("grpo_dial")

MATH_COLUMNS = tuple(
    "prompt_id problem reference source difficulty prior_pass_rate solution".split()
)
DATASETS = ("gsm8k", "math500", "bigmath")
HUB_DEFAULTS = {  # dataset -> (hub id, load_dataset config name or None)
    "gsm8k": ("openai/gsm8k", "main"),
    "math500": ("HuggingFaceH4/MATH-500", None),
    "bigmath": ("open-r1/Big-Math-RL-Verified-Processed", None),
}
DEFAULT_SPLIT = {"gsm8k": "train", "math500": "test", "bigmath": "train"}
BIGMATH_BANDS = (0.0, 0.2, 0.4, 0.6, 0.8, 1.0)  # band edges; the last band is closed on the right
COMMON_KEYS = ("dataset", "path", "split", "n", "seed")
FILTER_KEYS = {
    "gsm8k": (),
    "math500": ("levels", "subjects"),
    "bigmath": ("sources", "domains", "solve_rate"),
}
_ID_PREFIX = {"gsm8k": "gsm8k", "math500": "math", "bigmath": "bigmath"}
_SUFFIXES = (".jsonl", ".json", ".parquet")
_CALCULATOR = re.compile(r"<<[^<>]*>>")  # GSM8K's calculator annotations "<<16-3-4=9>>"


# --------------------------------------------------------------------------- reading


def _read_file(path: Path, report: LoadReport) -> pd.DataFrame:
    """Rows of a .jsonl, .json (array or JSON lines) or .parquet file as a DataFrame."""
    suffix = path.suffix.lower()
    if suffix == ".parquet":
        df = pd.read_parquet(path)
        report.n_read = len(df)
        return df
    if suffix == ".json":
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except json.JSONDecodeError:
            data = None  # JSON lines under a .json name
        if isinstance(data, list):
            rows = [r for r in data if isinstance(r, dict)]
            report.n_read = len(data)
            report.drop("invalid_json", len(data) - len(rows))
            return pd.DataFrame(rows)
    elif suffix != ".jsonl":
        raise ValueError(f"unsupported file type {path.suffix!r} (use .jsonl, .json or .parquet)")
    return pd.DataFrame(_read_jsonl(path, report))


def _read_raw(dataset: str, path: str, split: str, report: LoadReport) -> pd.DataFrame:
    """The raw rows of a local file / directory or a hub id (`datasets.load_dataset`)."""
    local = Path(path)
    if local.is_dir():
        found = [local / f"{split}{s}" for s in _SUFFIXES if (local / f"{split}{s}").is_file()]
        if not found:
            raise ValueError(f"no {split}.jsonl, {split}.json or {split}.parquet in {local}")
        local = found[0]
    if local.is_file():
        return _read_file(local, report)
    if HUB_ID.match(path) and not path.lower().endswith(_SUFFIXES):
        import datasets  # heavy import, only for hub ids

        config = HUB_DEFAULTS[dataset][1] if path == HUB_DEFAULTS[dataset][0] else None
        args = (path, config) if config else (path,)
        try:
            table = datasets.load_dataset(*args, split=split).with_format("arrow")[:]
        except Exception as exc:  # network, unknown id or split: one line naming the source
            raise ValueError(
                f"could not load {dataset} from hub id {path!r}: {_line(exc)}"
            ) from None
        report.n_read = table.num_rows
        return table.to_pandas()
    raise ValueError(f"{dataset} data not found: {path} (a local file or directory, or a hub id)")


def _line(exc: Exception) -> str:
    """An exception as one short line: its type and the first line of its message."""
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0][:200] if text else ''}"


def _text(values: pd.Series) -> pd.Series:
    """Strings stripped of surrounding whitespace; anything else (null, numbers) as is."""
    return values.map(lambda v: v.strip() if isinstance(v, str) else v)


def _int_as_str(v: object) -> object:
    """An integer answer as its decimal string; anything else unchanged (nulls stay null)."""
    return str(v) if isinstance(v, int | np.integer) and not isinstance(v, bool) else v


def _present(values: pd.Series) -> np.ndarray:
    return values.map(lambda v: isinstance(v, str) and v != "").to_numpy(dtype=bool)


def _require_columns(df: pd.DataFrame, columns: Sequence[str], name: str) -> None:
    if len(df) and (missing := [c for c in columns if c not in df.columns]):
        raise ValueError(f"{name} data lacks column(s): {', '.join(missing)}")


# --------------------------------------------------------------------------- adapters


def _gsm8k(df: pd.DataFrame, report: LoadReport) -> tuple[pd.DataFrame, np.ndarray]:
    """GSM8K question/answer rows: reference = text after the last '####', commas removed."""
    _require_columns(df, ("question", "answer"), "gsm8k")
    if not len(df):
        return _empty(), np.zeros(0, bool)
    answer = df["answer"].map(lambda v: v if isinstance(v, str) else "")
    head, _, tail = answer.str.rpartition("####").T.to_numpy()  # (3, N)
    has_marker = answer.str.contains("####", regex=False).to_numpy()
    reference = pd.Series(np.where(has_marker, tail, ""), dtype=object).str.replace(",", "")
    solution = pd.Series(head, dtype=object).map(lambda s: _CALCULATOR.sub("", s).strip())
    out = pd.DataFrame(
        {
            "problem": _text(df["question"]),
            "reference": reference.str.strip(),
            "source": "gsm8k",
            "difficulty": "gsm8k",
            "prior_pass_rate": np.nan,
            "solution": solution.where(solution != "", None),
        }
    )
    return out, np.ones(len(df), bool)


def _math500(
    df: pd.DataFrame,
    report: LoadReport,
    levels: Sequence[int] | None = None,
    subjects: Sequence[str] | None = None,
) -> tuple[pd.DataFrame, np.ndarray]:
    """MATH problem/answer/level/subject/solution rows; filters on level (1-5) and subject."""
    _require_columns(df, ("problem", "answer", "level"), "math500")
    if not len(df):
        return _empty(), np.zeros(0, bool)
    level = pd.to_numeric(
        df["level"].astype(str).str.extract(r"(\d+)", expand=False), errors="coerce"
    )  # (N,) "Level 3" and 3 alike
    solution = df["solution"] if "solution" in df.columns else pd.Series([None] * len(df))
    out = pd.DataFrame(
        {
            "problem": _text(df["problem"]),
            "reference": _text(df["answer"]),
            "source": "math500",
            "difficulty": [f"level{int(v)}" if v == v else "unknown" for v in level],
            "prior_pass_rate": np.nan,
            "solution": _text(solution).where(_present(_text(solution)), None),
        }
    )
    keep = np.ones(len(df), bool)
    if levels is not None:
        wanted = _int_list("levels", levels, 1, 5)
        keep &= level.isin(wanted).to_numpy()
    if subjects is not None:
        _require_columns(df, ("subject",), "math500")
        keep &= df["subject"].isin(_str_list("subjects", subjects)).to_numpy()
    return out, keep


def band_label(rate: np.ndarray) -> np.ndarray:
    """The BIGMATH_BANDS band of each solve rate, "sr<lo>-<hi>"; NaN or outside [0, 1] "unknown"."""
    rate = np.asarray(rate, dtype=float)
    edges = np.asarray(BIGMATH_BANDS)
    idx = np.clip(np.searchsorted(edges, rate, side="right") - 1, 0, len(edges) - 2)  # (N,)
    labels = np.array([f"sr{lo:.1f}-{hi:.1f}" for lo, hi in zip(edges, edges[1:], strict=False)])
    ok = (rate >= 0) & (rate <= 1)  # NaN compares False
    return np.where(ok, labels[idx], "unknown").astype(object)


def _bigmath(
    raw: pa.Table,
    report: LoadReport,
    sources: Sequence[str] | None = None,
    domains: Sequence[str] | None = None,
    solve_rate: Sequence[float] | None = None,
) -> tuple[pd.DataFrame, np.ndarray]:
    """Big-Math problem/answer/source/domain/llama8b_solve_rate rows with their filters."""
    needed = ["problem", "answer"] + (["source"] if sources is not None else [])
    needed += ["domain"] if domains is not None else []
    if missing := [c for c in needed if c not in raw.column_names]:
        raise ValueError(f"bigmath data lacks column(s): {', '.join(missing)}")
    n = raw.num_rows
    if "llama8b_solve_rate" in raw.column_names:  # arrow keeps null and NaN apart
        rate = pc.cast(raw.column("llama8b_solve_rate"), pa.float64())
        rate = rate.to_numpy(zero_copy_only=False).astype(float)  # (N,) null -> NaN
    else:
        rate = np.full(n, np.nan)
    valid = (rate >= 0) & (rate <= 1)
    cols = [c for c in ("problem", "answer", "source", "domain") if c in raw.column_names]
    df = raw.select(cols).to_pandas()
    source = df["source"] if "source" in df.columns else pd.Series(["bigmath"] * n)
    out = pd.DataFrame(
        {
            "problem": _text(df["problem"]),
            "reference": _text(df["answer"].map(_int_as_str)),
            "source": source.map(lambda v: v if isinstance(v, str) and v else "bigmath"),
            "difficulty": band_label(rate),
            "prior_pass_rate": np.where(valid, rate, np.nan),
            "solution": None,
        }
    )
    keep = np.ones(n, bool)
    if sources is not None:
        keep &= df["source"].isin(_str_list("sources", sources)).to_numpy()
    if domains is not None:
        keep &= _domain_hit(df["domain"], _str_list("domains", domains))
    if solve_rate is not None:
        lo, hi = _band(solve_rate)
        keep &= valid & (rate >= lo) & (rate <= hi)
    return out, keep


def _empty() -> pd.DataFrame:
    return pd.DataFrame({c: pd.Series(dtype=object) for c in MATH_COLUMNS[1:]})


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
        raise ValueError(
            f"unknown key(s) {', '.join(map(str, unknown))} in {dataset} spec; "
            f"valid: {', '.join(valid)}"
        )
    out = {"split": DEFAULT_SPLIT[dataset], "path": HUB_DEFAULTS[dataset][0], "n": None}
    out.update(spec)
    out.setdefault("seed", 0)
    for key in ("path", "split"):
        if not isinstance(out[key], str) or not out[key]:
            raise ValueError(f"{dataset} spec: {key} must be a non-empty string, got {out[key]!r}")
    for key, lo in (("n", 1), ("seed", 0)):
        v = out[key]
        if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < lo):
            raise ValueError(f"{dataset} spec: {key} must be an integer >= {lo}, got {v!r}")
    return out


def _name(spec: Mapping) -> str:
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


def load_source(spec: Mapping) -> tuple[pd.DataFrame, LoadReport]:
    """One source spec (see the module docstring) as a math prompt table and its LoadReport.

    Drop reasons, each row under its first: invalid_json, missing_problem, missing_answer,
    filtered_out (the dataset's filters), duplicate_problem (a repeated problem text, first kept),
    subsample (rows beyond `n`).
    """
    spec = check_spec(spec)
    dataset, filters = (
        spec["dataset"],
        {k: spec[k] for k in FILTER_KEYS[spec["dataset"]] if k in spec},
    )
    report = LoadReport(name=_name(spec))
    if dataset == "bigmath":
        if spec["path"].lower().endswith(_SUFFIXES) and not Path(spec["path"]).is_file():
            raise ValueError(f"bigmath data not found: {spec['path']}")
        try:
            raw = _read_bigmath_arrow(spec["path"], spec["split"])
        except ValueError:
            raise
        except Exception as exc:  # unreadable parquet, network, unknown id: one line
            raise ValueError(
                f"could not read bigmath data {spec['path']!r}: {_line(exc)}"
            ) from None
        report.n_read = raw.num_rows
        table, passes = _bigmath(raw, report, **filters)
    else:
        df = _read_raw(dataset, spec["path"], spec["split"], report)
        adapter = _gsm8k if dataset == "gsm8k" else _math500
        table, passes = adapter(df, report, **filters)
    steps = [
        ("missing_problem", _present(table["problem"])),
        ("missing_answer", _present(table["reference"])),
        ("filtered_out", passes),
    ]
    keep = np.ones(len(table), bool)
    for reason, ok in steps:
        report.drop(reason, int((keep & ~ok).sum()))
        keep &= ok
    table = table[keep].reset_index(drop=True)
    table.insert(0, "prompt_id", _stable_ids(table["problem"], _ID_PREFIX[dataset]))
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


def validate_math_table(df: pd.DataFrame) -> pd.DataFrame:
    """Canonical column order and dtypes; a one-line ValueError on a missing column, an empty or
    duplicate prompt_id, an empty problem or reference, or a prior pass rate outside [0, 1]."""
    if missing := [c for c in MATH_COLUMNS if c not in df.columns]:
        raise ValueError(f"invalid math table: missing column(s) {', '.join(missing)}")
    out = df[list(MATH_COLUMNS)].reset_index(drop=True).copy()
    for col in ("prompt_id", "problem", "reference"):
        if not _present(out[col]).all():
            raise ValueError(f"invalid math table: empty or non-string {col}")
    if out["prompt_id"].duplicated().any():
        raise ValueError("invalid math table: duplicate prompt_id")
    rate = pd.to_numeric(out["prior_pass_rate"], errors="coerce").to_numpy(float)
    if ((rate < 0) | (rate > 1)).any():
        raise ValueError("invalid math table: prior_pass_rate outside [0, 1]")
    for col in MATH_COLUMNS:
        if col != "prior_pass_rate":
            out[col] = out[col].astype("string")
    out["prior_pass_rate"] = rate
    return out


def normalized_problem(text: str) -> str:
    """The problem text with whitespace runs collapsed and case folded, for overlap checks."""
    return " ".join(text.split()).casefold()


__all__ = [
    "BIGMATH_BANDS",
    "DATASETS",
    "HUB_DEFAULTS",
    "MATH_COLUMNS",
    "band_label",
    "check_spec",
    "load_mix",
    "load_source",
    "normalized_problem",
    "validate_math_table",
]

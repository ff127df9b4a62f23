"""Pass-rate tables: one tidy schema, loaders for every source, parquet round trip.

A pass-rate table has one row per prompt: k of n logged rollouts were correct, p_hat = k/n.

    prompt_id           str    unique; "<prefix>-" + first 16 hex of sha1(problem text), plus
                               "-<m>" on the m-th repeat of the same text (m >= 1, file order)
    source              str    where the prompt comes from (Big-Math's own `source` column, else the
                               data set's name)
    difficulty          str/NA a difficulty label when the data has one ("level 3"), else NA
    n, k                int    rollouts and correct rollouts, 1 <= n, 0 <= k <= n
    p_hat               float  k / n
    mean_len_correct    float  mean length in characters of the correct responses, NaN (NA) if none
    mean_len_incorrect  float  the same for incorrect responses

Loaders return (table, LoadReport); the report counts rows read, kept and dropped by reason.
Big-Math stores a solve rate, not k: k = round(n * llama8b_solve_rate) with n = 64 rollouts.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

PASSRATE_COLUMNS = tuple(
    "prompt_id source difficulty n k p_hat mean_len_correct mean_len_incorrect".split()
)
HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")  # owner/name, not a path
BIGMATH_HUB_IDS = ("SynthLabsAI/Big-Math-RL-Verified", "open-r1/Big-Math-RL-Verified-Processed")
GSM8K_MODELS = ("6b_finetuning", "6b_verification", "175b_finetuning", "175b_verification")

# Synthetic Big-Math-like prior: mixture of Beta(a, b) on the latent pass rate. Fitted by least
# squares (Beta-binomial, n = 64) to the Big-Math numbers of DESIGN.md 1.3: it gives 4.0% never
# and 7.2% always solved, extreme mass 13.9% / 24.9% (Dr. GRPO / GRPO), medium 22.7% / 17.5%,
# silent fraction 59/44/32/23/17% at G = 4..64 (expected values; a draw of 20,000 varies by ~0.2%).
SYNTHETIC_MIXTURE = (
    # (weight, a, b)
    (0.617, 4.46, 1.58),  # broad, leaning easy
    (0.149, 1.37, 40.0),  # hard: mass near p = 0.03
    (0.234, 40.0, 1.37),  # easy: mass near p = 0.97
)


@dataclass
class LoadReport:
    """What a loader read, kept and dropped (reason -> row count; 0-count reasons omitted)."""

    name: str
    n_read: int = 0
    n_kept: int = 0
    dropped: dict[str, int] = field(default_factory=dict)

    @property
    def n_dropped(self) -> int:
        return sum(self.dropped.values())

    def drop(self, reason: str, count: int) -> None:
        if count:
            self.dropped[reason] = self.dropped.get(reason, 0) + int(count)

    def __str__(self) -> str:
        why = ", ".join(f"{r}: {c}" for r, c in self.dropped.items()) or "none"
        return (
            f"{self.name}: read {self.n_read}, kept {self.n_kept}, dropped {self.n_dropped} ({why})"
        )


# --------------------------------------------------------------------------- schema


def _fail(column: str, row: int | None, what: str) -> None:
    where = f"column {column!r}" + ("" if row is None else f" row {row}")
    raise ValueError(f"invalid pass-rate table: {where}: {what}")


def _numeric(values: pd.Series) -> np.ndarray:
    return pd.to_numeric(values, errors="coerce").to_numpy(dtype=float, na_value=np.nan)


def _first(mask: np.ndarray) -> int | None:
    bad = np.flatnonzero(mask)
    return int(bad[0]) if bad.size else None


def validate_passrates(df: pd.DataFrame) -> pd.DataFrame:
    """Check the schema and return the table with canonical column order and dtypes.

    Columns beyond the schema are kept, after it, unchanged.
    Raises a one-line ValueError naming the first bad column and (positional) row: missing
    column, null id/source/n/k, n < 1, k outside [0, n], p_hat != k/n, negative length,
    duplicate prompt_id.
    """
    if not isinstance(df, pd.DataFrame):
        raise ValueError(f"invalid pass-rate table: expected a DataFrame, got {type(df).__name__}")
    for col in PASSRATE_COLUMNS:
        if col not in df.columns:
            _fail(col, None, f"missing (need {', '.join(PASSRATE_COLUMNS)})")
    df = df.reset_index(drop=True)
    out = pd.DataFrame(index=df.index)
    for col in ("prompt_id", "source", "difficulty"):
        if col != "difficulty" and (row := _first(df[col].isna().to_numpy())) is not None:
            _fail(col, row, "null")
        out[col] = df[col].astype("string")
    num = {c: _numeric(df[c]) for c in PASSRATE_COLUMNS[3:]}  # (N,) each, NaN where missing
    for col in ("n", "k"):
        if (row := _first(~np.isfinite(num[col]) | (num[col] % 1 != 0))) is not None:
            _fail(col, row, f"not an integer: {df[col].iloc[row]!r}")
        out[col] = num[col].astype(np.int64)
    n, k = out["n"].to_numpy(), out["k"].to_numpy()
    if (row := _first(n < 1)) is not None:
        _fail("n", row, f"n = {n[row]} < 1")
    if (row := _first((k < 0) | (k > n))) is not None:
        _fail("k", row, f"k = {k[row]} outside [0, n = {n[row]}]")
    if (row := _first(~(np.abs(num["p_hat"] - k / n) <= 1e-9))) is not None:
        _fail("p_hat", row, f"p_hat = {num['p_hat'][row]} but k/n = {k[row]}/{n[row]}")
    out["p_hat"] = k / n  # the exact quotient, so band edges like 0.4 compare as written
    for col in ("mean_len_correct", "mean_len_incorrect"):
        if (row := _first(num[col] < 0)) is not None:
            _fail(col, row, f"negative length {num[col][row]}")
        out[col] = num[col]
    dup = out["prompt_id"].duplicated().to_numpy()
    if (row := _first(dup)) is not None:
        _fail("prompt_id", row, f"duplicate id {out['prompt_id'].iloc[row]!r}")
    for col in df.columns:  # extra columns (e.g. Wilson intervals) ride along after the schema
        if col not in PASSRATE_COLUMNS:
            out[col] = df[col]
    return out


def write_passrates(df: pd.DataFrame, path: str | Path) -> None:
    """Validate and write a pass-rate table as parquet (parent directories created)."""
    table = validate_passrates(df)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    table.to_parquet(path, index=False)


def read_passrates(path: str | Path) -> pd.DataFrame:
    """Read a parquet pass-rate table written by `write_passrates`, validated."""
    path = Path(path)
    if not path.exists():
        raise ValueError(f"pass-rate table not found: {path}")
    return validate_passrates(pd.read_parquet(path))


# --------------------------------------------------------------------------- helpers


def _stable_ids(texts: Iterable[str], prefix: str) -> np.ndarray:
    """prefix-sha1(text)[:16], "-m" appended to the m-th repeat (file order) so ids are unique."""
    base = pd.Series(
        [hashlib.sha1(t.encode("utf-8")).hexdigest()[:16] for t in texts], dtype=object
    )
    repeat = base.groupby(base).cumcount().to_numpy()  # (N,) 0 for first occurrence
    ids = (prefix + "-" + base).to_numpy(dtype=object)
    suffix = np.where(repeat > 0, "-" + repeat.astype(str), "")
    return (ids + suffix).astype(object)


def _require_file(path: str | Path) -> Path:
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"file not found: {path}")
    return path


def _read_jsonl(path: Path, report: LoadReport) -> list[dict]:
    """Objects of a JSON-lines file; blank lines skipped, unparsable or non-object lines dropped."""
    lines = [line for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    rows = []
    for line in lines:
        try:
            obj = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(obj, dict):
            rows.append(obj)
    report.n_read = len(lines)
    report.drop("invalid_json", len(lines) - len(rows))
    return rows


def _table(ids, source, n, k, difficulty=pd.NA, len_c=np.nan, len_w=np.nan) -> pd.DataFrame:
    """Assemble and validate a pass-rate table from per-row arrays (scalars broadcast)."""
    n, k = np.asarray(n, np.int64), np.asarray(k, np.int64)
    cols = (ids, source, difficulty, n, k, k / np.maximum(n, 1), len_c, len_w)
    return validate_passrates(pd.DataFrame(dict(zip(PASSRATE_COLUMNS, cols, strict=True))))


def _mean_lengths(texts: list[list[str]], correct: list[list[bool]]) -> tuple[np.ndarray, ...]:
    """Mean character length of correct and of incorrect responses per row; NaN where none."""
    sizes = np.array([len(t) for t in texts])  # (N,)
    row = np.repeat(np.arange(len(texts)), sizes)  # (R,) owning row of each response
    length = np.array([len(s) for t in texts for s in t], dtype=float)  # (R,)
    ok = np.array([c for cs in correct for c in cs], dtype=bool)  # (R,)
    out = []
    for mask in (ok, ~ok):
        total = np.bincount(row[mask], weights=length[mask], minlength=len(texts))  # (N,)
        count = np.bincount(row[mask], minlength=len(texts))  # (N,)
        out.append(np.divide(total, count, out=np.full(len(texts), np.nan), where=count > 0))
    return tuple(out)


# --------------------------------------------------------------------------- loaders


def _read_bigmath_arrow(source: str | Path, split: str) -> pa.Table:
    """The raw Big-Math rows as an arrow table (arrow keeps null and NaN apart; pandas does not)."""
    path = Path(source)
    if path.is_file():
        return pq.read_table(path)
    if path.is_dir():
        files = sorted(path.rglob("*.parquet"))
        if not files:
            raise ValueError(f"no parquet files under directory: {path}")
        return pa.concat_tables([pq.read_table(f) for f in files], promote_options="default")
    text = str(source)
    if text.startswith(("http://", "https://")) or HUB_ID.match(text):
        import datasets  # heavy import, only for remote sources

        if HUB_ID.match(text):
            remote = datasets.load_dataset(text, split=split)
        else:
            remote = datasets.load_dataset("parquet", data_files=text, split="train")
        return remote.with_format("arrow")[:]
    raise ValueError(
        f"file not found: {source} (nor a URL or hub id such as {', '.join(BIGMATH_HUB_IDS)})"
    )


def _domain_hit(domain: pd.Series, wanted: list[str]) -> np.ndarray:
    """Rows with a domain entry equal to a wanted one or below it in the "A -> B" hierarchy."""
    flat = domain.explode().dropna().astype(str)  # one row per (prompt, entry), index = prompt
    match = flat.isin(wanted) | flat.str.startswith(tuple(d + " -> " for d in wanted))
    hit = np.zeros(len(domain), bool)
    hit[flat.index[match.to_numpy()].to_numpy()] = True
    return hit


def load_bigmath(
    source: str | Path,
    split: str = "train",
    n: int = 64,
    *,
    sources: list[str] | None = None,
    domains: list[str] | None = None,
    solve_rate_band: tuple[float, float] | list[float] | None = None,
) -> tuple[pd.DataFrame, LoadReport]:
    """Big-Math solve rates as a pass-rate table: k = round(n * llama8b_solve_rate), n = 64.

    `source` is a local parquet file, a directory of parquet files (read recursively, sorted;
    `split` is ignored), a hub id such as one of BIGMATH_HUB_IDS (`datasets.load_dataset`, split
    `split`), or an http(s) URL of a parquet file.
    prompt_id hashes the problem text ("bigmath-..."), computed before any row is dropped so a
    filter never changes an id. Drop reasons, in order: missing_problem, solve_rate_null,
    solve_rate_nan, solve_rate_out_of_range (outside [0, 1]), then the filters: source_filter
    (`source` not in `sources`), domain_filter (no domain entry equal to, or below in the
    "A -> B" hierarchy, one of `domains`), solve_rate_band (solve rate outside [lo, hi]).
    """
    n = int(n)
    if n < 1:
        raise ValueError(f"n (rollouts behind each solve rate) must be >= 1, got {n}")
    band = None
    if solve_rate_band is not None:
        band = tuple(float(x) for x in solve_rate_band)
        if len(band) != 2 or not 0 <= band[0] <= band[1] <= 1:
            raise ValueError(
                f"solve_rate_band must be (lo, hi), 0 <= lo <= hi <= 1, got {solve_rate_band}"
            )
    raw = _read_bigmath_arrow(source, split)
    needed = ["problem", "source", "llama8b_solve_rate"] + (
        ["domain"] if domains is not None else []
    )
    missing = [c for c in needed if c not in raw.column_names]
    if missing:
        raise ValueError(f"Big-Math data {source} lacks column(s): {', '.join(missing)}")
    report = LoadReport(name=f"bigmath:{source}", n_read=raw.num_rows)

    rate_col = pc.cast(raw.column("llama8b_solve_rate"), pa.float64())
    null = pc.is_null(rate_col).to_numpy(zero_copy_only=False)  # (N,)
    rate = rate_col.to_numpy(zero_copy_only=False).astype(float)  # (N,) null -> NaN
    df = raw.select([c for c in needed if c != "llama8b_solve_rate"]).to_pandas()

    ok_problem = df["problem"].notna().to_numpy()
    ids = np.full(len(df), None, dtype=object)
    ids[ok_problem] = _stable_ids(df["problem"][ok_problem].astype(str), "bigmath")
    df["prompt_id"] = ids
    steps = [  # (reason, row passes); each dropped row counts under its first failing reason
        ("missing_problem", ok_problem),
        ("solve_rate_null", ~null),
        ("solve_rate_nan", ~(np.isnan(rate) & ~null)),
        ("solve_rate_out_of_range", ~((rate < 0) | (rate > 1))),  # NaN compares False
    ]
    if sources is not None:
        steps.append(("source_filter", df["source"].isin(list(sources)).to_numpy()))
    if domains is not None:
        steps.append(("domain_filter", _domain_hit(df["domain"], list(domains))))
    if band is not None:
        steps.append(("solve_rate_band", (rate >= band[0]) & (rate <= band[1])))
    keep = np.ones(len(df), bool)
    for reason, ok in steps:
        report.drop(reason, (keep & ~ok).sum())
        keep &= ok
    df, rate = df[keep], rate[keep]
    k = np.rint(n * rate).astype(np.int64)  # (N,) the rate is a fraction of n rollouts
    source_col = df["source"].fillna("unknown").astype(str).to_numpy()
    table = _table(df["prompt_id"].to_numpy(), source_col, np.full(len(df), n), k)
    report.n_kept = len(table)
    return table, report


def _list_of(x: object, kind: type) -> bool:
    return isinstance(x, list) and len(x) > 0 and all(isinstance(v, kind) for v in x)


def load_gsm8k_solutions(path: str | Path) -> tuple[pd.DataFrame, LoadReport]:
    """GSM8K example_model_solutions.jsonl: n = 4 logged solutions (GSM8K_MODELS), k correct.

    A row is dropped as "malformed" unless it has a string `question` and every model object
    carries a bool `is_correct` and a string `solution`. Lengths are characters of `solution`.
    """
    path = _require_file(path)
    report = LoadReport(name=f"gsm8k_solutions:{path}")
    rows = _read_jsonl(path, report)

    def ok(r: dict) -> bool:
        models = [r.get(m) for m in GSM8K_MODELS]
        return isinstance(r.get("question"), str) and all(
            isinstance(m, dict)
            and isinstance(m.get("is_correct"), bool)
            and isinstance(m.get("solution"), str)
            for m in models
        )

    good = [r for r in rows if ok(r)]
    report.drop("malformed", len(rows) - len(good))
    texts = [[r[m]["solution"] for m in GSM8K_MODELS] for r in good]
    correct = [[r[m]["is_correct"] for m in GSM8K_MODELS] for r in good]
    len_c, len_w = _mean_lengths(texts, correct)
    ids = _stable_ids((r["question"] for r in good), "gsm8k")
    k = np.array([sum(c) for c in correct], dtype=np.int64)
    table = _table(ids, "gsm8k", len(GSM8K_MODELS), k, len_c=len_c, len_w=len_w)
    report.n_kept = len(table)
    return table, report


def _level(value: object) -> object:
    """ "Level 3" -> "level 3"; any other string as given; missing -> NA."""
    if not isinstance(value, str | int):
        return pd.NA
    m = re.fullmatch(r"\s*level\s*(\d+)\s*", str(value), flags=re.IGNORECASE)
    return f"level {int(m.group(1))}" if m else str(value)


def load_math_cot(path: str | Path) -> tuple[pd.DataFrame, LoadReport]:
    """math_cot_100.jsonl: n = len(score) scored responses per MATH problem, k = sum(score).

    A row is dropped as "malformed" unless `question` is a string, `response` a non-empty list of
    strings and `score` a list of bools of the same length. difficulty = "level N" from `level`.
    """
    path = _require_file(path)
    report = LoadReport(name=f"math_cot:{path}")
    rows = _read_jsonl(path, report)

    def ok(r: dict) -> bool:
        resp, score = r.get("response"), r.get("score")
        return (
            isinstance(r.get("question"), str)
            and _list_of(resp, str)
            and _list_of(score, bool)
            and len(resp) == len(score)
        )

    good = [r for r in rows if ok(r)]
    report.drop("malformed", len(rows) - len(good))
    len_c, len_w = _mean_lengths([r["response"] for r in good], [r["score"] for r in good])
    ids = _stable_ids((r["question"] for r in good), "math")
    n = np.array([len(r["score"]) for r in good], dtype=np.int64)
    k = np.array([sum(r["score"]) for r in good], dtype=np.int64)
    level = pd.array([_level(r.get("level")) for r in good], dtype="string")
    table = _table(ids, "math", n, k, difficulty=level, len_c=len_c, len_w=len_w)
    report.n_kept = len(table)
    return table, report


def synthetic_bigmath_like(
    n_prompts: int = 20000, n: int = 64, seed: int = 0
) -> tuple[pd.DataFrame, LoadReport]:
    """Seeded Big-Math-like table: p ~ sum_j w_j Beta(a_j, b_j) (SYNTHETIC_MIXTURE), k ~ Bin(n, p).

    With n = 64: E[never solved] = 4.0%, E[always solved] = 7.2%, as in Big-Math.
    """
    n_prompts, n = int(n_prompts), int(n)
    if n_prompts < 1 or n < 1:
        raise ValueError(f"n_prompts and n must be >= 1, got n_prompts={n_prompts}, n={n}")
    w, a, b = (np.array(c, dtype=float) for c in zip(*SYNTHETIC_MIXTURE, strict=True))
    rng = np.random.default_rng(seed)
    comp = rng.choice(len(w), size=n_prompts, p=w / w.sum())  # (N,)
    p = rng.beta(a[comp], b[comp])  # (N,) latent pass rate
    k = rng.binomial(n, p)  # (N,)
    ids = np.char.add("synthetic-", np.arange(n_prompts).astype(str)).astype(object)
    table = _table(ids, "synthetic", n, k)
    return table, LoadReport(name=f"synthetic:seed={seed}", n_read=n_prompts, n_kept=n_prompts)


# --------------------------------------------------------------------------- dispatcher

LOADERS: Mapping[str, Callable[..., tuple[pd.DataFrame, LoadReport]]] = {
    "bigmath": load_bigmath,
    "gsm8k_solutions": load_gsm8k_solutions,
    "math_cot": load_math_cot,
    "synthetic": synthetic_bigmath_like,
}


def load_passrates(spec: Mapping) -> tuple[pd.DataFrame, LoadReport]:
    """Load one pass-rate table from a spec {kind: ..., <that loader's keyword arguments>}.

    `path` is accepted for every file-backed kind (for bigmath it is the `source` argument: a
    local parquet path or hub id). Unknown kinds, unknown or missing keys and missing files raise
    a one-line ValueError.
    """
    if not isinstance(spec, Mapping) or "kind" not in spec:
        raise ValueError(
            f"pass-rate spec needs a 'kind' (one of {', '.join(LOADERS)}), got {spec!r}"
        )
    kind = spec["kind"]
    if kind not in LOADERS:
        raise ValueError(f"unknown pass-rate kind {kind!r}; valid: {', '.join(LOADERS)}")
    kwargs = {key: value for key, value in spec.items() if key != "kind"}
    if kind == "bigmath" and "path" in kwargs:
        if "source" in kwargs:
            raise ValueError("bigmath spec: give 'path' or 'source', not both")
        kwargs["source"] = kwargs.pop("path")
    params = inspect.signature(LOADERS[kind]).parameters
    unknown = sorted(set(kwargs) - set(params))
    if unknown:
        valid = ["path" if p in ("path", "source") else p for p in params]
        raise ValueError(
            f"unknown key(s) {', '.join(unknown)} for kind {kind!r}; valid: {', '.join(valid)}"
        )
    needed = [p for p, v in params.items() if v.default is inspect.Parameter.empty]
    if missing := [p for p in needed if p not in kwargs]:
        raise ValueError(f"pass-rate spec of kind {kind!r} needs 'path' (missing {missing[0]!r})")
    return LOADERS[kind](**kwargs)

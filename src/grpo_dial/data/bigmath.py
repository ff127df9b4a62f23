"""Big-Math (SynthLabsAI/Big-Math-RL-Verified and its processed mirror): problems with a solve rate.

Columns: `problem`, `answer`, `source`, `domain` (list of "A -> B -> C" paths),
`llama8b_solve_rate` (fraction of 64 Llama-3.1-8B rollouts that were correct; may be null).
`read_bigmath` is the one reader (a local parquet file, a directory of parquet files, a hub id or
an http(s) URL); arrow is kept so a null rate and a NaN rate stay apart. Two consumers build on
it: the pass-rate table (passrates/loaders.py: needs a rate in [0, 1]) and the prompt table
(`bigmath_problems`: needs a problem and an answer; the rate only labels the difficulty band).
Both id a problem by data/ids.py with the "bigmath" prefix.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from grpo_dial.data.prompt_table import stripped
from grpo_dial.data.reading import one_line
from grpo_dial.data.sources import BIGMATH_HUB_IDS, is_hub_id, is_url

BIGMATH_BANDS = (0.0, 0.2, 0.4, 0.6, 0.8, 1.0)  # band edges; the last band is closed on the right


def read_bigmath(source: str | Path, split: str = "train") -> pa.Table:
    """The raw Big-Math rows as an arrow table. A directory is read recursively (sorted parquet
    files; `split` ignored); a hub id through `datasets.load_dataset(id, split=split)`; a URL as
    one parquet file. Any failure is a one-line ValueError naming the source."""
    path = Path(source)
    try:
        if path.is_file():
            return pq.read_table(path)
        if path.is_dir():
            files = sorted(path.rglob("*.parquet"))
            if not files:
                raise ValueError(f"no parquet files under directory: {path}")
            return pa.concat_tables([pq.read_table(f) for f in files], promote_options="default")
        text = str(source)
        if is_url(text) or is_hub_id(text):
            import datasets  # heavy import, only for remote sources

            if is_hub_id(text):
                remote = datasets.load_dataset(text, split=split)
            else:
                remote = datasets.load_dataset("parquet", data_files=text, split="train")
            return remote.with_format("arrow")[:]
    except ValueError as exc:
        if not isinstance(exc, pa.ArrowException):  # ours, already one line
            raise
        raise ValueError(f"could not read bigmath data {str(source)!r}: {one_line(exc)}") from None
    except Exception as exc:  # network, unknown id: one line
        raise ValueError(f"could not read bigmath data {str(source)!r}: {one_line(exc)}") from None
    raise ValueError(
        f"file not found: {source} (nor a URL or hub id such as {', '.join(BIGMATH_HUB_IDS)})"
    )


def solve_rates(raw: pa.Table) -> tuple[np.ndarray, np.ndarray]:
    """(rate, is_null), both (N,): llama8b_solve_rate as float (null -> NaN) and where it was
    null rather than NaN; all NaN / all null when the column is absent."""
    if "llama8b_solve_rate" not in raw.column_names:
        return np.full(raw.num_rows, np.nan), np.ones(raw.num_rows, bool)
    rate = pc.cast(raw.column("llama8b_solve_rate"), pa.float64())
    null = pc.is_null(rate).to_numpy(zero_copy_only=False)
    return rate.to_numpy(zero_copy_only=False).astype(float), null


def domain_hit(domain: pd.Series, wanted: Sequence[str]) -> np.ndarray:
    """Rows with a domain entry equal to a wanted one or below it in the "A -> B" hierarchy."""
    wanted = list(wanted)
    flat = domain.explode().dropna().astype(str)  # one row per (prompt, entry), index = prompt
    match = flat.isin(wanted) | flat.str.startswith(tuple(d + " -> " for d in wanted))
    hit = np.zeros(len(domain), bool)
    hit[flat.index[match.to_numpy()].to_numpy()] = True
    return hit


def band_label(rate: np.ndarray) -> np.ndarray:
    """The BIGMATH_BANDS band of each solve rate, "sr<lo>-<hi>"; NaN or outside [0, 1] "unknown"."""
    rate = np.asarray(rate, dtype=float)
    edges = np.asarray(BIGMATH_BANDS)
    idx = np.clip(np.searchsorted(edges, rate, side="right") - 1, 0, len(edges) - 2)  # (N,)
    labels = np.array([f"sr{lo:.1f}-{hi:.1f}" for lo, hi in zip(edges, edges[1:], strict=False)])
    ok = (rate >= 0) & (rate <= 1)  # NaN compares False
    return np.where(ok, labels[idx], "unknown").astype(object)


def _int_as_str(v: object) -> object:
    """An integer answer as its decimal string; anything else unchanged (nulls stay null)."""
    return str(v) if isinstance(v, int | np.integer) and not isinstance(v, bool) else v


def bigmath_problems(
    raw: pa.Table,
    sources: Sequence[str] | None = None,
    domains: Sequence[str] | None = None,
    solve_rate: tuple[float, float] | None = None,
) -> tuple[pd.DataFrame, np.ndarray]:
    """Big-Math rows as prompt-table rows (prompt_table.ADAPTED_COLUMNS) and which rows pass the
    source, domain and solve-rate [lo, hi] filters (a null or NaN rate fails the last)."""
    needed = ["problem", "answer"] + (["source"] if sources is not None else [])
    needed += ["domain"] if domains is not None else []
    if missing := [c for c in needed if c not in raw.column_names]:
        raise ValueError(f"bigmath data lacks column(s): {', '.join(missing)}")
    n = raw.num_rows
    rate, _ = solve_rates(raw)  # (N,)
    valid = (rate >= 0) & (rate <= 1)
    cols = [c for c in ("problem", "answer", "source", "domain") if c in raw.column_names]
    df = raw.select(cols).to_pandas()
    source = df["source"] if "source" in df.columns else pd.Series(["bigmath"] * n)
    out = pd.DataFrame(
        {
            "problem": stripped(df["problem"]),
            "reference": stripped(df["answer"].map(_int_as_str)),
            "source": source.map(lambda v: v if isinstance(v, str) and v else "bigmath"),
            "difficulty": band_label(rate),
            "prior_pass_rate": np.where(valid, rate, np.nan),
            "solution": None,
            "id_text": df["problem"],
        }
    )
    keep = np.ones(n, bool)
    if sources is not None:
        keep &= df["source"].isin(list(sources)).to_numpy()
    if domains is not None:
        keep &= domain_hit(df["domain"], domains)
    if solve_rate is not None:
        lo, hi = solve_rate
        keep &= valid & (rate >= lo) & (rate <= hi)
    return out, keep

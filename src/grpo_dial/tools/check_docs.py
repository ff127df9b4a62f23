"""Check every number README.md and docs/*.md quote from a pipeline table against that table.

A quoted number names its source in an HTML comment right after it (invisible when rendered):

    0.9966<!-- results: simulate/synthetic/summary.csv arm=hadw hardest_quartile_final_p -->

The comment holds, split like a shell line (quote a value with spaces): the table's path under the
results directory (.csv or .parquet); any `column=value` selectors (a value equal as text, or as
a number where both are numbers); exactly one bare word, the column; and options:
`round=N` (N decimals; default: as many as the quoted text has, in scientific notation where
it writes one), `pct=N` (x 100, N decimals),
`sci=N` (scientific, N decimals, as 7e-16), `agg=max|min|mean|sum|absmax` (over every selected
row; without it the selectors must pick exactly one), `tol=X` (the quoted number may differ from
the table's, in the quoted units, by X: a trained-model number, which moves with float rounding)
and `config=DIR` (an overlay's results directory, relative to the root, instead of --results).

The quoted number is the one that ends right before the comment; a `%` or `x` and bold's `**` may
stand between them. An annotation without `tol` is exact (closed forms and seeded simulations
come out the same on any machine): the table's value, formatted as stated, must equal the quoted
number.
A table under a trained-model path (TRAINED) must state `tol`. A table that is not there (its
results dir absent, or the stage not run) is skipped, or a failure under `--require`.
Fenced code blocks and inline code spans are not read.

Usage: python -m grpo_dial.tools.check_docs [--results results] [--only seeded|trained]
[--require] [--root .] [--verbose]; one line per failure (file:line, quoted against the table's
value, table and cell), a last line with the counts, exit 1 on any failure.
"""

from __future__ import annotations

import argparse
import math
import re
import shlex
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

ANNOTATION = re.compile(r"<!--\s*results:(?P<spec>.*?)-->")
NUMBER = re.compile(
    r"(?P<num>[+\-\u2212]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:[eE][+\-\u2212]?\d+)?)"
    r"(?:%|x)?\**\s*$"
)
INLINE_CODE = re.compile(r"`[^`\n]*`")
OPTIONS = ("round", "pct", "sci", "agg", "tol", "config")
AGGREGATES = ("max", "min", "mean", "sum", "absmax")
# Tables of the trained policy (or read from it): their numbers move with float rounding.
TRAINED = (
    "train/", "decompose/", "policy/", "passrates/base_policy", "difficulty/base_policy/",
    "simulate/base_policy/", "length_bias/base_policy/", "length_pressure/", "allocation/",
    "channel/", "aware/", "aware_sweep/", "external/", "compare/",
)


@dataclass(frozen=True)
class Annotation:
    """One quoted number and the table cell it names."""

    file: str  # as reported, relative to the root
    line: int
    quoted: str  # the number as the text writes it
    spec: str  # the comment's text, for messages
    table: str = ""
    column: str = ""
    selectors: tuple[tuple[str, str], ...] = ()
    options: dict[str, str] = field(default_factory=dict)
    error: str = ""  # a malformed annotation: why

    @property
    def seeded(self) -> bool:
        """Exact (no `tol`): a closed-form or seeded number."""
        return "tol" not in self.options

    def where(self) -> str:
        cell = " ".join([*(f"{k}={v}" for k, v in self.selectors), self.column])
        return f"{self.table} {cell}".strip()


def parse_spec(spec: str) -> tuple[str, str, tuple[tuple[str, str], ...], dict[str, str]]:
    """(table, column, selectors, options) of a comment's text; ValueError says what is wrong."""
    try:
        words = shlex.split(spec)
    except ValueError as exc:
        raise ValueError(f"cannot split the annotation: {exc}") from None
    if not words:
        raise ValueError("empty annotation: name a table, a column and any column=value")
    table, rest = words[0], words[1:]
    if not table.endswith((".csv", ".parquet")):
        raise ValueError(f"the first word must be a .csv or .parquet table, got {table!r}")
    bare = [w for w in rest if "=" not in w]
    if len(bare) != 1:
        raise ValueError(f"name exactly one column (a bare word), got {bare or 'none'}")
    pairs = [w.split("=", 1) for w in rest if "=" in w]
    options = {k: v for k, v in pairs if k in OPTIONS}
    selectors = tuple((k, v) for k, v in pairs if k not in OPTIONS)
    for key in ("round", "pct", "sci"):
        if key in options and not options[key].isdigit():
            raise ValueError(f"{key}= takes a number of decimals, got {options[key]!r}")
    if sum(k in options for k in ("round", "pct", "sci")) > 1:
        raise ValueError("give at most one of round=, pct=, sci=")
    if options.get("agg", "max") not in AGGREGATES:
        raise ValueError(f"agg= is one of {', '.join(AGGREGATES)}, got {options['agg']!r}")
    if "tol" in options:
        try:
            float(options["tol"])
        except ValueError:
            raise ValueError(f"tol= takes a number, got {options['tol']!r}") from None
    elif table.startswith(TRAINED):
        raise ValueError(f"{table} is a trained-model table: state its tolerance, tol=X")
    return table, bare[0], selectors, options


def annotations(path: Path, name: str) -> Iterator[Annotation]:
    """Every annotation of one markdown file, in order, outside code blocks and code spans."""
    fenced = False
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if line.lstrip().startswith(("```", "~~~")):
            fenced = not fenced
            continue
        if fenced:
            continue
        text = INLINE_CODE.sub(lambda m: " " * len(m.group()), line)
        for match in ANNOTATION.finditer(text):
            spec = match.group("spec").strip()
            found = NUMBER.search(text[: match.start()])
            quoted = found.group("num") if found else ""
            base = dict(file=name, line=number, quoted=quoted, spec=spec)
            if not found:
                yield Annotation(**base, error="no number right before the annotation")
                continue
            try:
                table, column, selectors, options = parse_spec(spec)
            except ValueError as exc:
                yield Annotation(**base, error=str(exc))
                continue
            yield Annotation(**base, table=table, column=column, selectors=selectors,
                             options=options)


def to_float(text: str) -> float:
    """A quoted number as a float: a sign, thousands commas and a Unicode minus allowed."""
    return float(text.replace(",", "").replace("\u2212", "-"))


def _matches(cell: object, wanted: str) -> bool:
    if str(cell) == wanted:
        return True
    try:
        return math.isclose(float(cell), float(wanted), rel_tol=0, abs_tol=1e-12)
    except (TypeError, ValueError):
        return False


def cell_value(frame, note: Annotation) -> float:
    """The number the annotation names in a table; ValueError says why there is none."""
    for column in [note.column, *(k for k, _ in note.selectors)]:
        if column not in frame.columns:
            names = ", ".join(map(str, frame.columns))
            raise ValueError(f"no column {column!r} (columns: {names})")
    rows = frame
    for column, wanted in note.selectors:
        rows = rows[[_matches(cell, wanted) for cell in rows[column]]]
    values = rows[note.column]
    agg = note.options.get("agg")
    if len(values) == 0:
        raise ValueError("the selectors match no row")
    if agg is None and len(values) != 1:
        raise ValueError(f"the selectors match {len(values)} rows, not 1 (or state agg=)")
    try:
        numbers = values.astype(float)
    except (TypeError, ValueError):
        raise ValueError(f"column {note.column!r} is not numeric: {values.iloc[0]!r}") from None
    if agg is None:
        return float(numbers.iloc[0])
    if agg == "absmax":
        return float(numbers.abs().max())
    return float(getattr(numbers, agg)())


def decimals(quoted: str) -> int:
    """How many decimals a quoted number writes (its mantissa's, for 7e-16)."""
    mantissa = re.split("[eE]", quoted)[0]
    return len(mantissa.split(".")[1]) if "." in mantissa else 0


def formatted(value: float, note: Annotation) -> str:
    """The table's value written as the annotation says (pct scales by 100)."""
    opts = note.options
    if "sci" in opts:
        return f"{value:.{int(opts['sci'])}e}"
    if "pct" in opts:
        return f"{100 * value:.{int(opts['pct'])}f}"
    places = int(opts["round"]) if "round" in opts else decimals(note.quoted)
    if "round" not in opts and re.search("[eE]", note.quoted):
        return f"{value:.{places}e}"  # 3.66e-3 quoted: the same mantissa decimals
    return f"{value:.{places}f}"


def compare(note: Annotation, value: float) -> str:
    """'' when the quoted number agrees with the table's value, else the failure's text."""
    table_text = formatted(value, note)
    quoted = to_float(note.quoted)
    if "tol" in note.options:
        scaled = 100 * value if "pct" in note.options else value
        if abs(quoted - scaled) <= float(note.options["tol"]) + 1e-12:
            return ""
        return f"quoted {note.quoted}, table {table_text} (tol {note.options['tol']})"
    if math.isclose(quoted, to_float(table_text), rel_tol=1e-12, abs_tol=0):
        return ""
    return f"quoted {note.quoted}, table {table_text}"


def read(path: Path):
    """A .csv or .parquet table."""
    import pandas as pd

    return pd.read_parquet(path) if path.suffix == ".parquet" else pd.read_csv(path)


@dataclass
class Report:
    """What a check found: failure lines, skipped and passed annotations."""

    failures: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    passed: int = 0

    def summary(self) -> str:
        return (f"check-docs: {self.passed} passed, {len(self.failures)} failed, "
                f"{len(self.skipped)} skipped")


def pages(root: Path) -> list[Path]:
    """README.md and docs/*.md under the root, those that exist."""
    return [p for p in [root / "README.md", *sorted((root / "docs").glob("*.md"))] if p.is_file()]


def check(root: Path, results: Path, only: str | None = None, require: bool = False) -> Report:
    """Check every annotation of the root's pages against the tables under `results`.

    `results` is relative to the root unless absolute; `config=DIR` reads DIR (relative to the
    root) instead. `only` is None, 'seeded' (exact annotations) or 'trained' (with `tol`). A
    missing table is skipped, or a failure when `require`.
    """
    report, cache = Report(), {}
    results = results if results.is_absolute() else root / results
    for page in pages(root):
        for note in annotations(page, page.relative_to(root).as_posix()):
            at = f"{note.file}:{note.line}"
            if note.error:
                report.failures.append(f"{at}: bad annotation ({note.error}): {note.spec}")
                continue
            if only is not None and note.seeded != (only == "seeded"):
                continue
            base = root / note.options["config"] if "config" in note.options else results
            path = base / note.table
            if not path.is_file():
                why = f"{at}: {path} not found" + ("" if base.is_dir() else f" ({base} absent)")
                (report.failures if require else report.skipped).append(why)
                continue
            try:
                if path not in cache:
                    cache[path] = read(path)
                problem = compare(note, cell_value(cache[path], note))
            except ValueError as exc:
                problem = str(exc)
            if problem:
                report.failures.append(f"{at}: {problem} ({note.where()})")
            else:
                report.passed += 1
    return report


def main(argv: list[str] | None = None) -> int:
    """The command line: check, print each failure and the counts; 1 on any failure."""
    parser = argparse.ArgumentParser(
        prog="python -m grpo_dial.tools.check_docs",
        description="Check the numbers README.md and docs/*.md quote against the tables.",
    )
    parser.add_argument("--results", default="results", help="the results directory (results)")
    parser.add_argument("--root", default=".", help="the repository root (.)")
    parser.add_argument("--only", choices=("seeded", "trained"),
                        help="seeded: the exact annotations only; trained: those with tol=")
    parser.add_argument("--require", action="store_true",
                        help="a missing table fails instead of being skipped")
    parser.add_argument("--verbose", "-v", action="store_true", help="list the skipped ones")
    args = parser.parse_args(argv)
    report = check(Path(args.root), Path(args.results), args.only, args.require)
    for line in report.failures:
        print(line)
    if args.verbose:
        for line in report.skipped:
            print(f"skipped: {line}")
    print(report.summary())
    return 1 if report.failures else 0


if __name__ == "__main__":
    sys.exit(main())

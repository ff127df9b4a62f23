"""Entry points of the bring-your-own-run rules: import a logged run, diagnose it, draw it.

Same contract as `grpo_dial.stages`: `stage(input, output, params)` with plain mappings.
`diagnose_directory` runs all three in one call for `grpo-dial diagnose`.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path

import pandas as pd

from grpo_dial.tables import read_table, write_table

log = logging.getLogger("grpo_dial")

DIAGNOSIS = ("silent", "passrates", "recommended_g", "terms", "curves", "summary")
_SUFFIX = {"passrates": ".parquet", "recommended_g": ".parquet", "curves": ".parquet"}
# every file `diagnose_directory`, `write_estimator` and `numbers_lines` may write into out
DIAGNOSE_FILES = (
    "responses.parquet",
    *(f"{key}{_SUFFIX.get(key, '.csv')}" for key in DIAGNOSIS),
    "diagnosis.png",
    "diagnosis.pdf",
    "estimator.csv",
    "advantage_fit.csv",
    "manifest.json",  # dag.provenance.MANIFEST
)


def import_run(input: Mapping, output: Mapping, params: Mapping) -> None:
    """One external run's rollouts in the per-response schema."""
    from grpo_dial.external.importers import import_run as load

    responses, report = load(params["spec"])
    log.info("imported %s", report)
    write_table(responses, output["responses"])


def diagnose_run(input: Mapping, output: Mapping, params: Mapping) -> None:
    """Silent fraction against the closed form, pass rates and recommended G, decomposition."""
    from grpo_dial.external.diagnostics import diagnose, run_warnings

    tables = diagnose(read_table(input["responses"]), params["name"], params)
    log.info("%s:\n%s", params["name"], tables["summary"].to_string(index=False))
    for line in run_warnings(tables["summary"]):
        log.warning("%s: %s", params["name"], line)
    for name, frame in tables.items():
        write_table(frame, output[name])


def external_figure(input: Mapping, output: Mapping, params: Mapping) -> None:
    from grpo_dial.figures import save
    from grpo_dial.figures.external import external_figure as draw

    fig = draw(params["name"], read_table(input["curves"]), read_table(input["silent"]),
               read_table(input["terms"]))  # fmt: skip
    save(fig, output["figure_png"], output["figure_pdf"])


def clear_earlier_diagnosis(out_dir: str | Path) -> list[str]:
    """Delete the DIAGNOSE_FILES an earlier diagnosis left in out_dir, and nothing else (other
    files and folders stay); logs and returns the names deleted."""
    out = Path(out_dir)
    stale = [name for name in DIAGNOSE_FILES if (out / name).is_file()]
    for name in stale:
        (out / name).unlink()
    if stale:
        log.info("cleared an earlier diagnosis from %s: %s", out_dir, ", ".join(stale))
    return stale


def diagnose_directory(
    spec: Mapping, out_dir: str | Path, params: Mapping, record: Mapping | None = None,
    started: str | None = None,
) -> tuple[pd.DataFrame, str, list[str], dict]:
    """Import, diagnose and draw one run into out_dir (never the run's own folder); returns the
    key numbers, the import report in one line, the warnings and the manifest. Once the run is
    imported, the files an earlier diagnosis wrote to out_dir are deleted
    (clear_earlier_diagnosis) before any is written, so the folder never mixes two runs'
    outputs. The manifest (stages.manifest.build_manifest of `record`, the command's arguments
    in dag.provenance.run_record's keys; {} without one) is written last, as manifest.json."""
    from grpo_dial.dag.provenance import MANIFEST
    from grpo_dial.external.diagnostics import diagnose, run_warnings
    from grpo_dial.external.importers import import_run as load
    from grpo_dial.figures import save
    from grpo_dial.figures.external import external_figure as draw
    from grpo_dial.stages.manifest import build_manifest, write_manifest

    out, run = Path(out_dir).resolve(), Path(spec["path"]).resolve()
    if out == run or run in out.parents:
        raise ValueError(f"--out {out_dir} is inside the run folder {spec['path']}; choose another")
    responses, report = load(spec)
    log.info("imported %s", report)
    clear_earlier_diagnosis(out_dir)
    write_table(responses, out / "responses.parquet")
    name = Path(spec["path"]).name or "run"
    tables = diagnose(responses, name, params)
    for key, frame in tables.items():
        write_table(frame, out / f"{key}{_SUFFIX.get(key, '.csv')}")
    save(draw(name, tables["curves"], tables["silent"], tables["terms"]),
         out / "diagnosis.png", out / "diagnosis.pdf")  # fmt: skip
    manifest = {} if record is None else build_manifest(record, started)
    if manifest:
        write_manifest(manifest, out / MANIFEST)
    return tables["summary"], str(report), run_warnings(tables["summary"]), manifest


def run_estimator_line(
    run: str | Path, configs: list[str] | None, fmt: str | None, version: str | None = None
) -> tuple[pd.DataFrame, str, dict | None]:
    """Which estimator the run used, from the engine options its folder's files (and `configs`)
    name, at the engine release `version` (else the one the files name): the table, the one
    line and the dial entry (external.run_estimator.estimate). Writes nothing, so that a bad
    option stops the command before any table is written; `write_estimator` writes the table."""
    from grpo_dial.external.engine_options import read_run
    from grpo_dial.external.run_estimator import estimate

    paths = [*([run] if Path(run).is_dir() else []), *(configs or [])]
    return estimate(read_run(paths), fmt, version)


def write_estimator(table: pd.DataFrame, out_dir: str | Path) -> None:
    """estimator.csv in out_dir, when the run named any engine option."""
    if len(table):
        write_table(table, Path(out_dir) / "estimator.csv")


def numbers_lines(out_dir: str | Path, entry: Mapping | None) -> list[str]:
    """What the logged advantages of the run imported into out_dir say (external.advantage_fit):
    the best-fitting dial with its largest residual, a disagreement with the config's `entry`,
    float32 silent-group advantages; writes advantage_fit.csv. [] when none is logged."""
    from grpo_dial.external.advantage_fit import (
        disagreement,
        fit_advantages,
        fit_line,
        float32_silent_groups,
    )  # fmt: skip

    responses = read_table(Path(out_dir) / "responses.parquet")
    table = fit_advantages(responses)
    if table.empty:
        return []
    write_table(table, Path(out_dir) / "advantage_fit.csv")
    lines = [f"numbers: {fit_line(table)}"]
    if (line := disagreement(responses, entry, table)) is not None:
        lines.append(f"warning: {line}")
    if (line := float32_silent_groups(responses)) is not None:
        lines.append(f"warning: {line}")
    return lines

"""tools/check_docs.py: quoted numbers against their tables, on fixtures and on the real pages."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml
from conftest import REPO

from grpo_dial.tools import check_docs as cd

SIM = "simulate/synthetic/summary.csv"


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """A repository with two small tables and a README that quotes them."""
    sim = tmp_path / "results" / "simulate" / "synthetic"
    sim.mkdir(parents=True)
    pd.DataFrame({
        "arm": ["grpo", "hadw", "hadw_prompt"],
        "final_p": [0.993618, 0.996562, 0.995806],
        "silent": [0.844327, 0.892078, 0.883371],
        "steps": [26, 13, 18],
    }).to_csv(sim / "summary.csv", index=False)
    theory = tmp_path / "results" / "theory"
    theory.mkdir()
    pd.DataFrame({
        "p": [0.05, 0.05, 0.5], "G": [8, 16, 8], "residual": [2.2e-16, 6.7e-16, 0.0],
    }).to_csv(theory / "residuals.csv", index=False)
    (tmp_path / "docs").mkdir()
    (tmp_path / "README.md").write_text(
        "# Title\n"
        f"HA-DW ends at 0.9966<!-- results: {SIM} arm=hadw final_p --> and\n"
        f"silent **89.2%**<!-- results: {SIM} arm=hadw silent pct=1 --> in "
        f"13<!-- results: {SIM} arm=hadw steps -->/18<!-- results: {SIM} arm=hadw_prompt steps -->"
        " steps;\n"
        "residual 7e-16<!-- results: theory/residuals.csv residual agg=max sci=0 -->, "
        "2.2e-16<!-- results: theory/residuals.csv p=0.05 G=8 residual sci=1 -->\n"
    )
    return tmp_path


def run(root: Path, **kwargs) -> cd.Report:
    return cd.check(root, Path("results"), **kwargs)


def test_matching_numbers_pass(root):
    report = run(root)
    assert report.failures == [] and report.skipped == []
    assert report.passed == 6


def test_an_edited_number_fails_naming_file_line_and_both_values(root):
    readme = root / "README.md"
    readme.write_text(readme.read_text().replace("0.9966<", "0.9949<"))
    report = run(root)
    assert report.failures == [
        f"README.md:2: quoted 0.9949, table 0.9966 ({SIM} arm=hadw final_p)"
    ]
    assert report.passed == 5


def test_a_percentage_is_scaled_and_rounded(root):
    readme = root / "README.md"
    readme.write_text(readme.read_text().replace("89.2%", "85.9%"))
    (failure,) = run(root).failures
    assert failure.startswith("README.md:3: quoted 85.9, table 89.2 (")


def test_a_missing_table_is_skipped_unless_required(root):
    (root / "docs" / "page.md").write_text(
        "trained +4.8<!-- results: decompose/summary.csv dial=grpo within tol=0.5 -->\n"
    )
    report = run(root)
    assert report.failures == [] and len(report.skipped) == 1
    assert report.skipped[0].startswith("docs/page.md:1: ")
    required = run(root, require=True)
    assert len(required.failures) == 1 and "decompose/summary.csv not found" in required.failures[0]
    absent = cd.check(root, Path("elsewhere"))
    assert absent.passed == 0 and len(absent.skipped) == 7 and "absent" in absent.skipped[0]


def test_a_bad_selector_is_one_clear_line(root):
    (root / "docs" / "page.md").write_text(
        f"x 0.99<!-- results: {SIM} arm=dapo final_p -->\n"
        f"y 0.99<!-- results: {SIM} recipe=grpo final_p -->\n"
        f"z 0.99<!-- results: {SIM} final_p -->\n"
    )
    failures = run(root).failures
    assert failures[0] == f"docs/page.md:1: the selectors match no row ({SIM} arm=dapo final_p)"
    assert failures[1].startswith("docs/page.md:2: no column 'recipe' (columns: arm, final_p")
    assert failures[2].startswith("docs/page.md:3: the selectors match 3 rows, not 1")
    assert len(failures) == 3


def test_malformed_annotations_fail_with_the_reason(root):
    (root / "docs" / "page.md").write_text(
        f"no number<!-- results: {SIM} arm=hadw final_p -->\n"
        f"two 0.99<!-- results: {SIM} arm final_p -->\n"
        "trained 0.5<!-- results: decompose/summary.csv dial=grpo within -->\n"
        f"bad 0.99<!-- results: {SIM} arm=hadw final_p round=x -->\n"
    )
    failures = run(root).failures
    assert "no number right before the annotation" in failures[0]
    assert "name exactly one column" in failures[1]
    assert "trained-model table: state its tolerance" in failures[2]
    assert "round= takes a number of decimals" in failures[3]


def test_tolerance_and_only(root):
    (root / "docs" / "page.md").write_text(
        f"a 0.99<!-- results: {SIM} arm=grpo final_p tol=0.005 -->\n"
        f"b 0.98<!-- results: {SIM} arm=grpo final_p tol=0.005 -->\n"
    )
    report = run(root, only="trained")
    assert report.passed == 1 and len(report.failures) == 1
    assert report.failures[0].startswith("docs/page.md:2: quoted 0.98, table 0.99 (tol 0.005)")
    assert run(root, only="seeded").passed == 6 and run(root, only="seeded").failures == []


def test_code_is_not_read_and_overlays_read_their_own_dir(root):
    overlay = root / "results" / "overlay" / "simulate" / "synthetic"
    overlay.mkdir(parents=True)
    pd.DataFrame({"arm": ["grpo"], "final_p": [0.5]}).to_csv(overlay / "summary.csv", index=False)
    (root / "docs" / "page.md").write_text(
        f"`0.1<!-- results: {SIM} arm=hadw final_p -->`\n"
        "```\n"
        f"0.1<!-- results: {SIM} arm=hadw final_p -->\n"
        "```\n"
        f"0.5<!-- results: {SIM} arm=grpo final_p config=results/overlay -->\n"
    )
    report = run(root)
    assert report.failures == [] and report.passed == 7


def test_the_command_line_exits_1_on_a_failure(root, capsys):
    assert cd.main(["--root", str(root)]) == 0
    assert capsys.readouterr().out.strip() == "check-docs: 6 passed, 0 failed, 0 skipped"
    readme = root / "README.md"
    readme.write_text(readme.read_text().replace("/18<", "/19<"))
    assert cd.main(["--root", str(root)]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[0] == f"README.md:3: quoted 19, table 18 ({SIM} arm=hadw_prompt steps)"


def seeded_tables() -> set[str]:
    """The default results' tables the real pages' exact annotations read."""
    return {
        note.table
        for page in cd.pages(REPO)
        for note in cd.annotations(page, page.name)
        if not note.error and note.seeded and "config" not in note.options
    }


@pytest.mark.slow
@pytest.mark.workflow
def test_every_seeded_number_of_the_docs_matches_the_embedded_default(tmp_path, shared_data):
    """CI: the cheap stages of the embedded default, then every exact annotation must pass."""
    tables = seeded_tables()
    assert tables, "the pages quote no seeded table"
    config = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    config.update(results_dir="results", data_mirror=str(shared_data))  # under --directory
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(config))
    result = subprocess.run(
        [sys.executable, "-m", "snakemake", "--snakefile", str(REPO / "Snakefile"),
         "--directory", str(tmp_path), "--configfile", str(tmp_path / "config.yaml"),
         "--cores", "2", *(f"results/{t}" for t in sorted(tables))],
        capture_output=True, text=True, timeout=900,
    )
    assert result.returncode == 0, result.stderr[-4000:]
    assert "rule train:" not in result.stdout + result.stderr  # no trained model needed
    report = cd.check(REPO, tmp_path / "results", only="seeded", require=True)
    assert report.failures == [], "\n".join(report.failures)
    assert report.passed > 0


def test_a_quoted_exponent_is_compared_in_scientific_notation(root):
    (root / "docs" / "page.md").write_text(
        "a 6.7e-16<!-- results: theory/residuals.csv p=0.05 G=16 residual -->\n"
        "b 6.6e-16<!-- results: theory/residuals.csv p=0.05 G=16 residual -->\n"
    )
    (failure,) = run(root).failures
    assert failure.startswith("docs/page.md:2: quoted 6.6e-16, table 6.7e-16 (")

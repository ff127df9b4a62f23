"""The run summary (stages.report.summarize_runs) carries the answer checker's failures."""

from __future__ import annotations

import pandas as pd

from grpo_dial.stages.report import summarize_runs

QUANTITIES = ("a0 a1 L0 L1 total mix within_correct within_incorrect within_incorrect_work "
              "within_incorrect_redundant").split()  # fmt: skip


def test_summary_sums_the_checker_columns_per_run():
    steps = pd.DataFrame({
        "dial": ["grpo"] * 3, "seed": [0] * 3, "step": [1, 2, 3], "silent_fraction": 0.5,
        "samples": 16, "checker_timeouts": [0, 2, 1], "checker_errors": [1, 0, 0],
        "checker_crashes": 0, "checker_bad_references": [0, 0, 4],
    })  # fmt: skip
    terms = pd.DataFrame({"quantity": QUANTITIES, "value": 0.1, "lo": 0.0, "hi": 0.2,
                          "share": 0.5, "share_lo": 0.4, "share_hi": 0.6})  # fmt: skip
    terms["dial"], terms["seed"] = "grpo", 0
    mass = pd.DataFrame({"dial": "grpo", "seed": 0, "band": ["extreme"], "mass": [1.0]})
    evals = pd.DataFrame({"dial": "grpo", "seed": 0, "difficulty": "all", "mode": ["greedy"],
                          "step": [0], "accuracy": [0.5]})  # fmt: skip
    row = summarize_runs(steps, terms, mass, evals, 4, 4).iloc[0]
    assert (row["checker_timeouts"], row["checker_errors"], row["checker_crashes"],
            row["checker_bad_references"]) == (3, 1, 0, 4)  # fmt: skip


def test_summary_stage_keys_every_table_by_its_path_under_the_results_folder(tmp_path):
    """The rule hands the stage its tables by name; summary.md names each by its path relative to
    itself, so the link under a table opens the file that holds its numbers."""
    from grpo_dial.stages.report import summary_markdown
    from grpo_dial.tables import write_table

    results = tmp_path / "results"
    dapo = pd.DataFrame({"model": ["closed_form", "saturating"], "n_params": [1, 2],
                         "r2": [0.9117, 0.9764], "r2_lo": [0.8912, 0.9634],
                         "r2_hi": [0.9431, 0.9863]})  # fmt: skip
    write_table(dapo, results / "dapo" / "fit_summary.csv")
    identity = pd.DataFrame({"dial": ["nostd_sequence"], "length_norm": ["sequence"],
                             "seq_relative_residual": [5e-16], "token_cosine": [0.80]})
    write_table(identity, results / "decompose" / "all_identity.parquet")
    summary_markdown(
        {"dapo": str(results / "dapo" / "fit_summary.csv"),
         "training_identity": str(results / "decompose" / "all_identity.parquet")},
        {"summary": str(results / "summary.md")}, {},
    )  # fmt: skip
    text = (results / "summary.md").read_text()
    assert "[`dapo/fit_summary.csv`](dapo/fit_summary.csv)" in text
    assert "| closed form, one timescale | 1 | 0.912 [0.891, 0.943] |" in text
    assert "| alpha 0, sequence normalizer | sequence | 1 | 5.0e-16 | 0.800 | 37 |" in text
    for line in text.splitlines():  # every linked path exists beside summary.md
        if line.startswith("Table: "):
            for path in line.split("](")[1:]:
                assert (results / path.split(")")[0]).exists()

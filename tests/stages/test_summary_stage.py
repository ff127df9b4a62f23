"""The summary stage (stages.summary.summary_markdown) names each table by its path."""

from __future__ import annotations

import pandas as pd


def test_summary_stage_keys_every_table_by_its_path_under_the_results_folder(tmp_path):
    """The rule hands the stage its tables by name; summary.md names each by its path relative to
    itself, so the link under a table opens the file that holds its numbers."""
    from grpo_dial.stages.summary import summary_markdown
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

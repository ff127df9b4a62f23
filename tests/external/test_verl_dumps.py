"""The verl importer on dumps built the way verl's own code builds them (external_fixtures cites
the lines): validation dumps in the rollout folder, the DAPO recipe's filtered batches and
dropped extra keys, overlong penalties in the score, a prompt repeated within a step."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from external_fixtures import write_verl_dumps

from grpo_dial.external.diagnostics import diagnose, group_checks, run_warnings
from grpo_dial.external.importers import import_run

PARAMS = {"window_fraction": 0.2, "n_boot": 20, "seed": 0, "fidelity": 0.9}


def _truth_frame(truth: dict) -> pd.DataFrame:
    rows = [dict(r, step=s) for s, rs in truth["train"].items() for r in rs]
    return pd.DataFrame(rows)


def test_validation_dumps_in_the_rollout_folder_are_not_training_rows(tmp_path):
    truth = write_verl_dumps(tmp_path / "r", test_freq=2, val_n=2)
    rows, report = import_run({"format": "verl", "path": str(tmp_path / "r")})
    # validation at 0 (before training), 2, 4 and the last step 6 overwrote those training files
    assert truth["val_steps"] == [0, 2, 4, 6]
    assert sorted(rows["step"].unique()) == [1, 3, 5]
    assert report.skipped == {"validation": 4 * 3 * 2}  # 3 prompts x val_kwargs.n = 2, 4 dumps
    assert not rows["prompt"].str.startswith("V").any()
    assert rows["G"].eq(4).all()  # no val_kwargs.n groups among the training groups
    assert "validation dumps at steps [0, 2, 4, 6]" in str(report)


def test_a_separate_validation_folder_alone_is_refused_in_one_line(tmp_path):
    write_verl_dumps(tmp_path / "r", test_freq=3, same_dir=False)
    rows, report = import_run({"format": "verl", "path": str(tmp_path / "r")})
    assert sorted(rows["step"].unique()) == list(range(1, 7)) and report.skipped == {}
    with pytest.raises(ValueError) as err:
        import_run({"format": "verl", "path": str(tmp_path / "r_val")})
    assert "validation" in str(err.value) and "\n" not in str(err.value)


def test_overlong_penalty_is_taken_out_of_the_score(tmp_path):
    truth = _truth_frame(write_verl_dumps(tmp_path / "r", seed=5))
    line = json.loads((tmp_path / "r" / "1.jsonl").read_text().splitlines()[0])
    assert {"acc", "overlong_reward", "overlong"} <= set(line)  # main trainer: infos kept
    rows, report = import_run({"format": "verl", "path": str(tmp_path / "r")})
    acc = [json.loads(x)["acc"] for s in range(1, 7) for x in (tmp_path / "r" / f"{s}.jsonl")
           .read_text().splitlines()]  # fmt: skip
    assert rows["correct"].tolist() == acc  # the file order is kept within a step
    # some correct responses score <= 0 once penalised: a plain score > 0 would call them wrong
    hurt = truth["score"].le(0) & np.array(acc)
    assert hurt.sum() > 0
    assert rows.loc[hurt.to_numpy(), "correct"].all()
    assert "score - overlong_reward > 0" in str(report)
    by_acc, _ = import_run({"format": "verl", "path": str(tmp_path / "r"), "correct_from": "acc"})
    assert by_acc["correct"].tolist() == acc


def test_dapo_filtered_dump_warns_that_silent_rates_cannot_be_estimated(tmp_path):
    write_verl_dumps(tmp_path / "r", filter_groups=True)
    line = json.loads((tmp_path / "r" / "1.jsonl").read_text().splitlines()[0])
    assert set(line) == {"input", "output", "gts", "score", "step"}  # extra keys dropped
    spec = {"format": "verl", "path": str(tmp_path / "r"), "threshold": -1}
    rows, _ = import_run(spec)
    assert ((rows["k"] > 0) & (rows["k"] < rows["G"])).all()
    tables = diagnose(rows, "dapo", PARAMS)
    summary = tables["summary"].set_index("metric")["value"]
    assert summary["all_groups_informative"] == 1.0
    assert np.isnan(summary["silent_fraction_first"]) and np.isnan(summary["silent_fraction_last"])
    assert any("cannot be estimated" in w for w in run_warnings(tables["summary"]))
    # the unfiltered run of the same shape has silent groups and no such warning
    write_verl_dumps(tmp_path / "u")
    plain, _ = import_run({"format": "verl", "path": str(tmp_path / "u")})
    assert group_checks(plain)["all_groups_informative"] == 0.0


def test_correct_from_acc_on_a_dapo_dump_says_why_acc_is_missing(tmp_path):
    write_verl_dumps(tmp_path / "r", filter_groups=True)
    with pytest.raises(ValueError) as err:
        import_run({"format": "verl", "path": str(tmp_path / "r"), "correct_from": "acc"})
    msg = str(err.value)
    assert "'acc'" in msg and "DAPO" in msg and "correct_from reward" in msg and "\n" not in msg


def test_a_prompt_repeated_within_a_step_is_flagged_as_an_unequal_group(tmp_path):
    write_verl_dumps(tmp_path / "r", repeat_prompt=True)
    rows, _ = import_run({"format": "verl", "path": str(tmp_path / "r")})
    sizes = rows.groupby(["step", "group"]).size()
    assert sizes.loc[2].max() == 8  # balance_batch shuffled the copies: no order to split by
    checks = group_checks(rows)
    assert checks["group_size"] == 4 and checks["unequal_groups"] == 1
    tables = diagnose(rows, "rep", PARAMS)
    assert any("differ from G = 4" in w for w in run_warnings(tables["summary"]))


def test_many_unusable_rewards_warn_and_g_comes_from_undamaged_groups(tmp_path, caplog):
    """A quarter of the dump's scores made non-numeric: the import warns in one line (above 3%
    skipped), and its G is read off the groups that lost no row (4), not the damaged ones (3):
    in the import's report, in the diagnosis's summary and in its warning."""
    import logging

    write_verl_dumps(tmp_path / "r")
    rng = np.random.default_rng(0)
    for path in sorted((tmp_path / "r").glob("*.jsonl")):
        lines = [json.loads(x) for x in path.read_text().splitlines()]
        for i in range(len(lines)):
            if i % 4 == 0 and rng.random() < 0.9:  # at most one row per group of 4
                lines[i]["score"] = "n/a"
        path.write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    with caplog.at_level(logging.WARNING, logger="grpo_dial"):
        rows, report = import_run({"format": "verl", "path": str(tmp_path / "r")})
    line = next(r.getMessage() for r in caplog.records if "skipped as unusable" in r.getMessage())
    assert "\n" not in line and "%) skipped as unusable" in line
    assert "G 4 (G from the" in str(report) and "groups that lost no row" in str(report)
    sizes = rows.groupby(["step", "group"]).size()
    assert (sizes == 3).sum() > (sizes == 4).sum()  # the kept rows' modal size would say 3
    checks = group_checks(rows)
    damaged = int((rows.groupby(["step", "group"])["lost"].max() > 0).sum())
    assert checks["group_size"] == 4 and checks["damaged_groups"] == damaged > 0
    assert checks["group_size_uncertain"] == 0.0 and checks["unequal_groups"] == damaged
    warnings = run_warnings(diagnose(rows, "holes", PARAMS)["summary"])
    assert any(f"{damaged} of " in w and "G = 4 from the groups that lost none" in w
               for w in warnings)  # fmt: skip
    assert not any("whole groups differ" in w for w in warnings)


def test_g_is_stated_uncertain_when_every_group_lost_rows(tmp_path):
    """One score per group made non-numeric: no group is whole, so the diagnosis keeps the
    modal kept size (3) and says in its summary and one warning line that G is uncertain."""
    write_verl_dumps(tmp_path / "r")
    for path in sorted((tmp_path / "r").glob("*.jsonl")):
        lines = [json.loads(x) for x in path.read_text().splitlines()]
        seen = set()
        for line in lines:  # the first row of each prompt in each step's file
            if line["input"] not in seen:
                seen.add(line["input"])
                line["score"] = "n/a"
        path.write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    rows, report = import_run({"format": "verl", "path": str(tmp_path / "r")})
    assert "G is uncertain" in str(report)
    checks = group_checks(rows)
    assert checks["group_size"] == 3 and checks["group_size_uncertain"] == 1.0
    warnings = run_warnings(diagnose(rows, "holes", PARAMS)["summary"])
    line = next(w for w in warnings if "uncertain" in w)
    assert "every group lost rows" in line and "\n" not in line

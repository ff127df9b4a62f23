"""The estimator read from the numbers (external.advantage_fit): logged advantages, written here
by each engine's formula in its dtype (numpy / torch, not the dial), fitted by every dial
setting over the run's own groups; a config that disagrees with them is reported; float32
silent-group advantages are named."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
import torch
from external_fixtures import write_trl_run

from grpo_dial.external.advantage_fit import (
    disagreement,
    fit_advantages,
    fit_line,
    float32_silent_groups,
)  # fmt: skip
from grpo_dial.external.importers import import_run
from grpo_dial.tools.cli import main


def _trl_grpo_advantages(run):
    """Rewrite a TRL run's `advantage` column as TRL's group std does it: float32,
    (r - mean) / (std ddof 1 + 1e-4) over the prompt's G completions."""
    for path in sorted((run / "completions").glob("*.parquet")):
        frame = pd.read_parquet(path)
        r = frame["accuracy_reward"].to_numpy(np.float32)
        g = frame.groupby("prompt", sort=False)["accuracy_reward"]
        mean = g.transform(lambda x: np.float32(x.to_numpy(np.float32).mean())).to_numpy(np.float32)
        std = g.transform(lambda x: np.float32(x.to_numpy(np.float32).std(ddof=1)))
        frame["advantage"] = (r - mean) / (std.to_numpy(np.float32) + np.float32(1e-4))
        frame.to_parquet(path, index=False)
    return run


def test_a_run_with_only_completions_and_advantages_is_named_by_the_fit(tmp_path, capsys,
                                                                          monkeypatch):  # fmt: skip
    # the fixture logs r - mean (Dr. GRPO's advantage); there is no config at all
    run = write_trl_run(tmp_path / "trl_out")
    monkeypatch.chdir(tmp_path)
    assert main(["diagnose", str(run), "--format", "trl", "--n-boot", "5", "--out", "d"]) == 0
    out = capsys.readouterr().out
    assert "estimator: no engine option found in the run's files" in out
    assert ("numbers: dr_grpo (paper std) {preset: dr_grpo, std_ddof: 0} in float64 fits the "
            "logged advantages of 288 responses, largest residual 0; next ") in out
    assert "disagree" not in out
    table = pd.read_csv(tmp_path / "d" / "advantage_fit.csv")
    others = table[table["dial"] != table.loc[0, "dial"]]
    assert table.loc[0, "max_residual"] == 0.0 and others["max_residual"].min() > 0.1


def test_trl_group_std_numbers_fit_trls_std_and_eps(tmp_path):
    run = _trl_grpo_advantages(write_trl_run(tmp_path / "r"))
    rows, _ = import_run({"format": "trl", "path": str(run)})
    table = fit_advantages(rows)
    best = table.iloc[0]
    assert best["candidate"] == "grpo (TRL std)" and best["max_residual"] < 1e-6
    assert fit_line(table).startswith("grpo (TRL std) {preset: grpo, std_ddof: 1, eps: 0.0001} in ")
    # verl's eps 1e-6 and the paper's population std are a visible step away
    verl = table[table["candidate"] == "grpo (verl std)"]["max_residual"].min()
    paper = table[table["candidate"] == "grpo (paper std)"]["max_residual"].min()
    assert verl > 1e-5 and paper > 0.05


def test_a_wrong_config_beside_right_numbers_is_reported(tmp_path, capsys, monkeypatch):
    run = write_trl_run(tmp_path / "trl_out")  # Dr. GRPO's numbers
    (run / "config.yaml").write_text("scale_rewards: group\nloss_type: grpo\n")
    monkeypatch.chdir(tmp_path)
    assert main(["diagnose", str(run), "--format", "trl", "--n-boot", "5", "--out", "a"]) == 0
    out = capsys.readouterr().out
    assert "estimator: trl: GRPO; as a dial: {preset: grpo, std_ddof: 1, eps: 0.0001" in out
    line = next(x for x in out.splitlines() if "disagree" in x)
    assert line.startswith("warning: the config and the numbers disagree: the config's dial "
                           "misses the logged advantages by up to 0.")  # fmt: skip
    assert line.endswith("dr_grpo (paper std) fits them to 0")
    # the right config: no disagreement
    (run / "config.yaml").write_text("scale_rewards: none\nloss_type: dr_grpo\n")
    assert main(["diagnose", str(run), "--format", "trl", "--n-boot", "5", "--out", "b"]) == 0
    assert "disagree" not in capsys.readouterr().out


def _verl_float32_dump(folder, seed=0):
    """verl dumps whose `advantage` is verl's grpo in float32, (r - mean) / (std + 1e-6) per
    group (torch.mean, torch.std as core_algos does), with silent groups at rewards 0.1 and
    0.3 that binary cannot hold, and at 0 and 1 that it can."""
    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True)
    for step in (1, 2):
        lines = []
        for j, reward in enumerate((0.1, 0.3, 0.0, 1.0, None, None, None)):
            r = (np.full(8, reward) if reward is not None
                 else rng.choice([0.0, 0.25, 1.0], 8, p=[0.4, 0.2, 0.4]))  # fmt: skip
            if reward is None and r.min() == r.max():
                r[0] = 1.0 - r[0]
            x = torch.tensor(r, dtype=torch.float32)
            a = ((x - torch.mean(x)) / (torch.std(x) + 1e-6)).tolist()
            lines += [json.dumps({"input": f"q{j}", "output": "y" * (5 + i), "score": float(ri),
                                  "step": step, "advantage": ai})
                      for i, (ri, ai) in enumerate(zip(r, a, strict=True))]  # fmt: skip
        (folder / f"{step}.jsonl").write_text("\n".join(lines) + "\n")
    return folder


def test_verl_float32_silent_groups_are_named_and_the_rest_fits(tmp_path):
    rows, _ = import_run({"format": "verl", "path": str(_verl_float32_dump(tmp_path / "v")),
                          "threshold": 0.5})  # fmt: skip
    warning = float32_silent_groups(rows)
    # 0.1: |A| 0.0074 at G 8; 0.3: 0.029 (docs/estimators.md, float32); 0 and 1 give 0
    assert warning.startswith("4 silent groups (all rewards equal, e.g. 0.1, 0.3, which binary "
                              "cannot hold) carry advantages up to 0.029 where exact")  # fmt: skip
    table = fit_advantages(rows)
    best = table.iloc[0]
    assert best["candidate"] == "grpo (verl std)" and best["max_residual"] < 1e-6
    assert best["responses"] == 2 * 5 * 8  # the four 0.1 / 0.3 groups left out of the fit
    # float64 rewards: the same log holds no rounding to name
    clean = rows.copy()
    clean.loc[clean["raw_reward"].isin([0.1, 0.3]), "advantage"] = 0.0
    assert float32_silent_groups(clean) is None


def test_disagreement_needs_a_good_fit_and_a_config(tmp_path):
    rows, _ = import_run({"format": "trl", "path": str(write_trl_run(tmp_path / "r"))})
    table = fit_advantages(rows)
    assert disagreement(rows, None, table) is None
    assert disagreement(rows, {"preset": "dr_grpo"}, table) is None
    assert disagreement(rows, {"preset": "rloo"}, table).startswith(
        "the config and the numbers disagree: the config's dial misses the logged advantages by "
        "up to 0.25,"
    )  # RLOO is G/(G-1) x Dr. GRPO: at G 4, |r - mean| <= 3/4 grows by 1/4 of it
    with pytest.raises(ValueError, match="no 'adv' column"):
        fit_advantages(rows, column="adv")


def test_a_user_named_advantage_column(tmp_path, capsys, monkeypatch):
    folder = _verl_float32_dump(tmp_path / "v")
    for path in folder.glob("*.jsonl"):  # the advantage under another key
        path.write_text(path.read_text().replace('"advantage"', '"adv_grpo"'))
    rows, _ = import_run({"format": "verl", "path": str(folder), "threshold": 0.5,
                          "advantage_column": "adv_grpo"})  # fmt: skip
    assert fit_advantages(rows).iloc[0]["candidate"] == "grpo (verl std)"
    monkeypatch.chdir(tmp_path)
    argv = ["diagnose", str(folder), "--format", "verl", "--threshold", "0.5", "--n-boot", "5"]
    assert main([*argv, "--advantage-column", "adv_grpo", "--out", "a"]) == 0
    out = capsys.readouterr().out
    assert "numbers: grpo (verl std) {preset: grpo, std_ddof: 1, eps: 1e-06, singleton: " in out
    assert "warning: 4 silent groups (all rewards equal, e.g. 0.1, 0.3" in out
    assert main([*argv, "--advantage-column", "nope", "--out", "b"]) == 2
    assert "lacks column 'nope'" in capsys.readouterr().err

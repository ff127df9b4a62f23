"""backends.trl.compare: per-run metrics from hand-made tables, intervals and the rank test."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from grpo_dial.analysis.seed_stats import detectable_shift
from grpo_dial.backends.trl.compare import (
    COLUMNS,
    METRICS,
    compare,
    markdown,
    not_learning,
    read_runs,
    run_metrics,
)


def tables(acc0: float, acc1: float, silent: list[float], walls: list[float], total: float):
    steps = pd.DataFrame({"step": [3, 1, 2], "silent_fraction": silent, "wall_seconds": walls,
                          "accuracy": [0.75, 0.25, 0.375]})  # by step: 0.25, 0.375, 0.75
    evals = pd.DataFrame({
        "step": [0, 0, 0, 3, 3, 3], "mode": ["greedy", "greedy", "sampled"] * 2,
        "difficulty": ["all", "easy", "all"] * 2,
        "accuracy": [acc0, 0.9, 0.8, acc1, 0.1, 0.2],
    })  # fmt: skip
    terms = pd.DataFrame({
        "quantity": ["total", "mix", "within_correct", "within_incorrect", "a0"],
        "kind": ["term"] * 4 + ["stat"], "value": [total, 1.0, total - 3.0, 2.0, 0.25],
    })  # fmt: skip
    return steps, evals, terms


def test_one_runs_metrics_by_hand():
    got = run_metrics(*tables(0.25, 0.5, [0.5, 0.25, 0.0], [3.0, 1.0, 2.5], -4.0))
    # sampled (all difficulties): 0.8 at step 0, 0.2 at step 3
    assert got.pop("d_sampled") == pytest.approx(-0.6, abs=1e-12)
    assert got == {
        "accuracy": 0.5, "d_accuracy": 0.25, "sampled": 0.2, "d_length": -4.0, "mix": 1.0,
        "within_correct": -7.0, "within_incorrect": 2.0, "silent": 0.25, "s_per_step": 2.5,
        "d_train": 0.5,  # 3 steps: windows of one, step 3's 0.75 minus step 1's 0.25
    }  # fmt: skip


def test_d_train_compares_the_first_and_last_eighth_of_the_steps():
    steps, evals, terms = tables(0.0, 0.0, [0.0] * 3, [1.0] * 3, 0.0)
    steps = pd.DataFrame({"step": range(1, 17), "silent_fraction": 0.0, "wall_seconds": 1.0,
                          "accuracy": np.arange(16.0)})  # fmt: skip
    # 16 steps: windows of 2, (14 + 15) / 2 - (0 + 1) / 2 = 14
    assert run_metrics(steps, evals, terms)["d_train"] == 14.0
    steps = steps.iloc[:9]  # 9 steps: windows of ceil(9 / 8) = 2, (7 + 8) / 2 - 0.5 = 7
    assert run_metrics(steps, evals, terms)["d_train"] == 7.0
    assert math.isnan(run_metrics(steps.iloc[:0], evals, terms)["d_train"])


def test_a_run_without_sampled_evaluations_has_no_sampled_metrics():
    steps, evals, terms = tables(0.25, 0.5, [0.0] * 3, [1.0] * 3, 1.0)
    got = run_metrics(steps, evals[evals["mode"] == "greedy"], terms)
    assert math.isnan(got["sampled"]) and math.isnan(got["d_sampled"])
    assert got["d_accuracy"] == 0.25


def test_pairs_intervals_and_rank_test_by_hand():
    runs = pd.DataFrame(
        [{"arm": "grpo", "seed": s, **dict.fromkeys(METRICS, v)} for s, v in enumerate([1, 2, 3])]
        + [{"arm": "grpo_trl", "seed": s, **dict.fromkeys(METRICS, v)}
           for s, v in enumerate([4, 5, 9])]
        + [{"arm": "alone", "seed": 0, **dict.fromkeys(METRICS, 0.0)}]
    )  # fmt: skip
    table = compare(runs)
    assert list(table["arm"].unique()) == ["grpo"] and list(table["metric"]) == list(METRICS)
    row = table.iloc[0]
    # own 1 2 3: mean 2, s 1, t_{0.95, 2} = 2.919986 -> half 2.919986 / sqrt 3 = 1.685854
    assert (row["own"], row["seeds"]) == (2.0, 3)
    assert row["own_lo"] == pytest.approx(2 - 1.685854, abs=1e-6)
    assert row["own_hi"] == pytest.approx(2 + 1.685854, abs=1e-6)
    # trl 4 5 9: mean 6, s sqrt(7)
    assert row["trl_hi"] == pytest.approx(6 + 2.919986 * math.sqrt(7) / math.sqrt(3), abs=1e-5)
    # fully separated 3 against 3: the exact two-sided p is 2 / C(6, 3) = 0.1
    assert row["p"] == pytest.approx(0.1)
    # trl - own = 4; Welch: v = 1/3 and 7/3, se sqrt(8/3), nu (8/3)^2 / ((1/9 + 49/9) / 2) = 2.56
    se, nu = math.sqrt(8 / 3), 2.56
    half = stats.t.ppf(0.95, nu) * se
    assert row["diff"] == 4.0
    assert (row["diff_lo"], row["diff_hi"]) == pytest.approx((4 - half, 4 + half), abs=1e-9)
    assert row["detectable"] == pytest.approx(detectable_shift(se, nu, level=0.95), rel=1e-9)
    assert row["agree"] is None  # 3 seeds a side: p cannot reach 0.05, the rule cannot fail
    line = markdown(table).splitlines()[2]
    assert line.startswith("| grpo | accuracy | 2 [0.314, 3.69] | 6 [1.54, 10.5] | 4 [")
    assert line.endswith("| 0.1 | - |")


@pytest.mark.parametrize(("trl", "p", "agree", "mark"), [
    ([5.0, 6.0, 7.0, 8.0], 2 / 70, False, "**no**"),  # fully separated: 2 / C(8, 4)
    ([0.5, 1.5, 3.5, 4.5], 1.0, True, "yes"),  # U = 1 + 2 + 2 + 3 = 8 of 16: the middle
])  # fmt: skip
def test_four_seeds_a_side_can_disagree(trl, p, agree, mark):
    own = [1.0, 2.0, 3.0, 4.0]
    runs = pd.DataFrame(
        [{"arm": "dapo", "seed": s, **dict.fromkeys(METRICS, v)} for s, v in enumerate(own)]
        + [{"arm": "dapo_trl", "seed": s, **dict.fromkeys(METRICS, v)} for s, v in enumerate(trl)]
    )  # fmt: skip
    row = compare(runs).iloc[0]
    assert row["seeds"] == 4 and row["p"] == pytest.approx(p)
    assert row["agree"] is not None and bool(row["agree"]) is agree
    assert markdown(compare(runs)).splitlines()[2].endswith(f"| {mark} |")


def test_not_learning_names_arms_whose_heldout_change_is_not_above_zero():
    def rows(arm, d_sampled, d_accuracy):
        pairs = enumerate(zip(d_sampled, d_accuracy, strict=True))
        return [{"arm": arm, "seed": s, **dict.fromkeys(METRICS, 0.0), "d_sampled": ds,
                 "d_accuracy": da} for s, (ds, da) in pairs]  # fmt: skip

    nan = float("nan")
    runs = pd.DataFrame(
        rows("grpo", [0.2, 0.25, 0.3], [-0.1, -0.1, -0.1])  # learns in the sampled measure
        + rows("grpo_trl", [0.2, -0.1, 0.3], [0.5, 0.5, 0.5])  # mean 0.133, interval crosses 0
        + rows("old", [nan, nan, nan], [0.01, 0.02, 0.03])  # greedy only: rises
        + rows("old_trl", [nan, nan, nan], [0.0, 0.0, 0.0])  # constant: no interval above 0
    )  # fmt: skip
    got = not_learning(runs)
    assert [line.split()[0] for line in got] == ["grpo_trl", "old_trl"]
    # s = sqrt(0.086667 / 2) = 0.20817, half 2.919986 x 0.20817 / sqrt 3 = 0.35095
    assert got[0].startswith("grpo_trl does not learn: d_sampled 0.133 [-0.218, 0.484]")
    assert got[1].startswith("old_trl does not learn: d_accuracy 0 [0, 0]")


def test_read_runs_finds_each_run_with_its_decomposition(tmp_path):
    for arm, seed, acc in (("dapo", 0, 0.5), ("dapo_trl", 1, 0.75), ("dapo", 2, 0.0)):
        steps, evals, terms = tables(0.0, acc, [0.0, 0.0, 0.0], [1.0, 1.0, 1.0], 2.0)
        run = tmp_path / "train" / arm / f"seed{seed}"
        run.mkdir(parents=True)
        steps.to_parquet(run / "steps.parquet")
        evals.to_parquet(run / "evals.parquet")
        if seed < 2:  # seed 2 has no decomposition yet: skipped
            folder = tmp_path / "decompose" / arm / f"seed{seed}"
            folder.mkdir(parents=True)
            terms.to_csv(folder / "terms.csv", index=False)
    runs = read_runs(tmp_path)
    assert list(zip(runs["arm"], runs["seed"], runs["accuracy"], strict=True)) == [
        ("dapo", 0, 0.5), ("dapo_trl", 1, 0.75)
    ]  # fmt: skip
    table = compare(runs)
    assert table["seeds"].eq(1).all() and table["p"].isna().all()
    assert np.isnan(table["own_lo"]).all()  # one seed: no interval


def _write_run(root, arm, seed, acc1, sampled1):
    steps, evals, terms = tables(0.25, acc1, [0.0, 0.5, 0.0], [1.0, 2.0, 3.0], 2.0)
    evals.loc[(evals["step"] == 3) & (evals["mode"] == "sampled"), "accuracy"] = sampled1
    run = root / "train" / arm / f"seed{seed}"
    run.mkdir(parents=True)
    steps.to_parquet(run / "steps.parquet")
    evals.to_parquet(run / "evals.parquet")
    folder = root / "decompose" / arm / f"seed{seed}"
    folder.mkdir(parents=True)
    terms.to_csv(folder / "terms.csv", index=False)


def test_main_writes_the_table_prints_it_and_names_what_does_not_learn(tmp_path, capsys):
    from grpo_dial.backends.trl.compare import main

    for seed, (own, trl) in enumerate([(0.9, 0.5), (0.95, 0.9), (1.0, 0.7)]):
        _write_run(tmp_path, "grpo", seed, 0.5, own)  # sampled 0.8 -> 0.9..1.0: learns
        _write_run(tmp_path, "grpo_trl", seed, 0.5, trl)  # -0.3, +0.1, -0.1: does not
    for _ in range(2):  # a second call overwrites compare/backends.csv in place
        main(str(tmp_path))
    printed = capsys.readouterr().out.splitlines()
    table = pd.read_csv(tmp_path / "compare" / "backends.csv")
    assert list(table.columns) == list(COLUMNS) and len(table) == len(METRICS)
    row = table.set_index("metric").loc["d_sampled"]
    assert row["own"] == pytest.approx(0.15) and row["trl"] == pytest.approx(-0.1)
    assert printed[0] == "| arm | metric | own | trl | trl - own | detectable | p | agree |"
    assert printed[1] == "|---|---|---|---|---|---|---|---|"
    assert printed[2].startswith("| grpo | accuracy | 0.5 [0.5, 0.5] | 0.5 [0.5, 0.5] |")
    assert printed[2 + len(METRICS)].startswith("grpo_trl does not learn: d_sampled -0.1 [")
    assert len(printed) == 2 * (2 + len(METRICS)) + 2  # two calls, one line each naming grpo_trl


def test_main_without_pairs_stops_in_one_line(tmp_path):
    from grpo_dial.backends.trl.compare import main

    _write_run(tmp_path, "grpo", 0, 0.5, 0.9)  # no grpo_trl
    with pytest.raises(SystemExit) as stop:
        main(str(tmp_path))
    assert str(stop.value) == f"no pair of <arm> and <arm>_trl runs with tables under {tmp_path}"
    assert not (tmp_path / "compare").exists()


def test_read_runs_of_an_empty_folder_has_the_columns(tmp_path):
    assert list(read_runs(tmp_path).columns) == ["arm", "seed", *METRICS]


def _pair(own, trl, arm="grpo"):
    return pd.DataFrame(
        [{"arm": arm, "seed": s, **dict.fromkeys(METRICS, v)} for s, v in enumerate(own)]
        + [{"arm": f"{arm}_trl", "seed": s, **dict.fromkeys(METRICS, v)}
           for s, v in enumerate(trl)]
    )  # fmt: skip


def test_the_level_reaches_every_interval_and_two_seeds_get_a_p():
    # own 1 2 3, trl 4 5 9 at level 0.5: t_{0.75, 2} = 0.816497, own half 0.816497 / sqrt 3
    row = compare(_pair([1.0, 2.0, 3.0], [4.0, 5.0, 9.0]), level=0.5).iloc[0]
    assert row["own_hi"] == pytest.approx(2 + 0.816497 / math.sqrt(3), abs=1e-6)
    assert row["trl_hi"] == pytest.approx(6 + 0.816497 * math.sqrt(7 / 3), abs=1e-5)
    half = stats.t.ppf(0.75, 2.56) * math.sqrt(8 / 3)
    assert row["diff_hi"] == pytest.approx(4 + half, abs=1e-9)
    # 2 seeds a side, separated: p = 2 / C(4, 2) = 1/3, no interval, no verdict
    row = compare(_pair([1.0, 2.0], [3.0, 4.0])).iloc[0]
    assert row["p"] == pytest.approx(1 / 3) and math.isnan(row["own_lo"])
    assert row["agree"] is None
    line = markdown(compare(_pair([1.0], [3.0]))).splitlines()[2]
    assert line == "| grpo | accuracy | 1 | 3 | 2 | nan | nan | - |"


def test_nine_seeds_a_side_get_the_exact_p():
    # fully separated 9 against 9: exact 2 / C(18, 9) = 4.11e-5 (scipy's default switches to
    # the normal approximation above 8 a side: 4.1e-4)
    row = compare(_pair([float(v) for v in range(9)], [float(v) for v in range(10, 19)])).iloc[0]
    assert row["p"] == pytest.approx(2 / 48620, rel=1e-9) and not row["agree"]


def test_agreement_holds_at_p_equal_to_the_level(monkeypatch):
    import grpo_dial.backends.trl.compare as cmp

    monkeypatch.setattr(cmp, "ALPHA", 2 / 70)  # exactly 4 against 4 fully separated
    row = cmp.compare(_pair([1.0, 2.0, 3.0, 4.0], [5.0, 6.0, 7.0, 8.0])).iloc[0]
    assert row["p"] == 2 / 70 and bool(row["agree"]) is True


def test_a_verdict_read_back_as_nan_prints_as_none():
    table = compare(_pair([1.0, 2.0, 3.0, 4.0], [5.0, 6.0, 7.0, 8.0]))
    table["agree"] = float("nan")  # as pd.read_csv gives an empty cell
    assert markdown(table).splitlines()[2].endswith("| - |")


def test_not_learning_takes_the_level_and_says_why():
    runs = _pair([0.1, 0.2, 0.6], [0.3, 0.3, 0.3])
    # own mean 0.3, s 0.264575; at 0.9 the interval crosses 0, at 0.5 (t 0.816497) it does not
    assert not_learning(runs)[0] == (
        "grpo does not learn: d_sampled 0.3 [-0.146, 0.746] over seeds; its pair's agreement "
        "says nothing"
    )
    assert not_learning(runs, level=0.5) == []

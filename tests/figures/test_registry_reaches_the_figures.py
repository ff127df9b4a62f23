"""A registered estimator (the toy of tests/toy_mad.py, one file) reaches every training figure
and the summary through the registry alone: its label names its arm everywhere (no arm shown by its
key), its logged column gets a panel of the estimators figure titled with its label, and a column no
run logged skips its panel while every other figure is still drawn (rule training_figures end to end
from tables)."""

from __future__ import annotations

import matplotlib.text
import numpy as np
import pandas as pd
import pytest
import toy_mad as toy
from matplotlib import pyplot as plt

from grpo_dial import figures
from grpo_dial.analysis.summary.training import STEPS, estimator_state
from grpo_dial.stages.registry import stage_for
from grpo_dial.tables import write_table

DIALS = ("toy_mad", "nostd_sequence")  # a registered toy and a factor setting of the table


@pytest.fixture
def toy_mad():
    """The toy MAD scale slot of tests/toy_mad.py, registered for one test only."""
    with toy.registered():
        yield


def _tables(with_column: bool) -> dict[str, pd.DataFrame]:
    steps = np.arange(1, 21)
    runs = [(d, s) for d in DIALS for s in (0, 1)]
    curves = pd.concat([pd.DataFrame({
        "dial": d, "seed": s, "step": steps, "band": "all", "mean_len_correct": 20.0 + s,
        "mean_len_incorrect": 20.0 + steps}) for d, s in runs], ignore_index=True)  # fmt: skip
    step_rows = pd.concat([pd.DataFrame({
        "dial": d, "seed": s, "step": steps, "accuracy": 0.3 + 0.01 * steps,
        "mean_len": 20.0 + steps + s, "all_correct_fraction": 0.1, "all_wrong_fraction": 0.2,
        "expected_silent_base": 0.25,
        "mad_scale": (0.2 + 0.001 * steps) if d == "toy_mad" else np.nan,
    }) for d, s in runs], ignore_index=True)  # fmt: skip
    if not with_column:
        step_rows = step_rows.drop(columns="mad_scale")
    terms = pd.DataFrame(
        [(d, s, "term", q, v, v / 4.0, np.nan, np.nan) for d, s in runs
         for q, v in (("mix", -1.0), ("within_correct", 1.0), ("within_incorrect", 4.0))]
        + [(d, s, "term", "total", 4.0, 1.0, 3.0, 5.0) for d, s in runs],
        columns=["dial", "seed", "kind", "quantity", "value", "share", "lo", "hi"],
    )  # fmt: skip
    identity = pd.DataFrame({"dial": [d for d, _ in runs], "seq_relative_residual": 1e-7,
                             "token_cosine": [0.9, 0.91, 0.8, 0.81]})  # fmt: skip
    return {"steps": step_rows, "terms": terms, "curves": curves, "identity": identity}


NAMES = ("length_curves", "decomposition", "accuracy_length", "silent_training",
         "identity_training", "estimators_training")  # fmt: skip


def _draw(tmp_path, monkeypatch, with_column: bool) -> dict[str, plt.Figure]:
    inputs = {}
    for name, table in _tables(with_column).items():
        inputs[name] = str(tmp_path / f"{name}.parquet")
        write_table(table, inputs[name])
    outputs = {f"{n}_{k}": str(tmp_path / f"{n}.{k}") for n in NAMES for k in ("png", "pdf")}
    drawn = {}
    monkeypatch.setattr(figures, "save", lambda fig, png, pdf=None: drawn.setdefault(
        png.rsplit("/", 1)[1].split(".")[0], fig))  # fmt: skip
    stage_for("training_figures")(inputs, outputs, {})
    return drawn


def _texts(fig: plt.Figure) -> list[str]:
    return [t.get_text() for t in fig.findobj(matplotlib.text.Text) if t.get_text()]


def test_the_registered_label_names_its_arm_in_every_training_figure(toy_mad, tmp_path,
                                                                      monkeypatch):  # fmt: skip
    drawn = _draw(tmp_path, monkeypatch, with_column=True)
    assert sorted(drawn) == sorted(NAMES)
    for name, fig in drawn.items():
        text = " ".join(_texts(fig))
        assert "Toy MAD" in text, name  # the registry's label
        assert "alpha 0, sequence normalizer" in text or name == "estimators_training", name
        for key in DIALS:
            assert key not in text, (name, key)  # never an internal id
        plt.close(fig)


def test_the_registered_column_gets_its_panel_titled_by_its_estimator(toy_mad, tmp_path,
                                                                       monkeypatch):  # fmt: skip
    fig = _draw(tmp_path, monkeypatch, with_column=True)["estimators_training"]
    assert [ax.get_title() for ax in fig.axes] == ["Toy MAD"]
    assert fig.axes[0].get_ylabel() == "mad scale"
    line = fig.axes[0].get_lines()[0]  # 0.2 + 0.001 step, a centred mean of 9 steps: step 1
    assert np.allclose(line.get_ydata()[:3], [0.203, 0.2035, 0.204])  # averages steps 1..5
    plt.close("all")


def test_a_column_no_run_logged_skips_its_panel_not_the_other_figures(toy_mad, tmp_path,
                                                                      monkeypatch):  # fmt: skip
    drawn = _draw(tmp_path, monkeypatch, with_column=False)
    assert sorted(drawn) == sorted(NAMES)  # every figure drawn
    assert "none of" in drawn["estimators_training"].texts[0].get_text()
    plt.close("all")


def test_the_summary_names_the_registered_column_by_its_estimator(toy_mad):
    steps = _tables(with_column=True)["steps"]
    text = "\n".join(estimator_state({STEPS: steps}))
    assert "| Toy MAD | Toy MAD: mad scale | 0.201 -> 0.220 |" in text


def test_the_toy_logs_its_column_in_a_real_run_and_its_panel_draws_it(toy_mad, base_dir,
                                                                      tmp_path):  # fmt: skip
    """Two steps of the own trainer with the toy's preset: the steps table carries its column
    (each step's mean MAD scale, in (0, 1]) and the estimators figure draws that column's panel
    from the run's own table."""
    from _rl_fixtures import FakeTask

    from grpo_dial.core.dial import read_arm
    from grpo_dial.core.estimators import column_labels
    from grpo_dial.figures.estimators import estimator_state_figure
    from grpo_dial.train.config import TrainConfig
    from grpo_dial.train.loop import train_run

    config = TrainConfig(
        steps=2, prompts_per_step=3, group_size=4, max_new_tokens=8, train_pool=20,
        heldout_prompts=6, eval_every=2, checkpoint_every=2, identity_every=0, progress=False,
    )  # fmt: skip
    outputs = {name: tmp_path / f"{name}.parquet" for name in ("steps", "responses")}
    dial = read_arm({"preset": "toy_mad"}).dial
    train_run(base_dir, FakeTask(), dial, config, outputs, tmp_path / "ckpt")
    steps = pd.read_parquet(outputs["steps"]).assign(dial="toy_mad", seed=0)
    assert steps[toy.COLUMN].between(0.0, 1.0, inclusive="right").all()
    assert column_labels()[toy.COLUMN] == toy.LABEL
    fig = estimator_state_figure(steps, column_labels(), names={"toy_mad": toy.LABEL})
    assert [ax.get_title() for ax in fig.axes] == [toy.LABEL]
    plt.close(fig)

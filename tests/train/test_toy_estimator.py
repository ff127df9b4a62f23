"""A toy estimator registered here, in one entry, reaches everything the pipeline derives from
the registry: a config arm (its own field, read and range-checked), the config schema (generated:
its field validates and a bad value names the key), the training log (its column, logged by a
real run), a figure label (core.arm_names) and the TRL backend's refusal, by name."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
import pytest
import torch
import yaml
from _rl_fixtures import FakeTask, one_thread  # noqa: F401

from grpo_dial.backends.trl.config import backend_error
from grpo_dial.core.advantage import advantages
from grpo_dial.core.arm_names import arm_name, display_names
from grpo_dial.core.dial import Dial, dial_settings, read_arm
from grpo_dial.core.estimators import ESTIMATORS, register_estimator, unregister_estimator
from grpo_dial.core.settings import Setting
from grpo_dial.dag import ConfigError
from grpo_dial.dag.plan import open_plan
from grpo_dial.dag.schema import read_schema
from grpo_dial.figures.training import decomposition_labels
from grpo_dial.train.config import TrainConfig
from grpo_dial.train.loop import table_columns, train_run

REPO = Path(__file__).resolve().parents[2]
SCHEMA = REPO / "workflow" / "schemas" / "config.schema.yaml"
TRL = {"preset": "grpo", "std_ddof": 1, "eps": 0.0001}


@pytest.fixture
def toy():
    """Cap |A| at toy_cap; log the responses each step saw. Registered for one test only."""

    @register_estimator(
        "toy_cap",
        label="Toy cap",
        kind="advantage",
        fields={
            "toy_cap": Setting(
                None,
                "Cap every advantage's size at this value (a toy for the registry's tests); "
                "None: off.",
                kind=float, low=0.0, low_open=True, nullable=True,
            )
        },
        active=lambda dial: dial.toy_cap is not None,
        columns=("toy_responses",),
        log=lambda dial, inputs, batch: {"toy_responses": len(batch.rewards)},
        why_not="TRL does not cap advantages",
        preset={"toy_cap": 1.0},
    )  # fmt: skip
    def cap(adv, stats, dial, regroup):
        return adv.clamp(-dial.toy_cap, dial.toy_cap)

    yield ESTIMATORS["toy_cap"]
    unregister_estimator("toy_cap")


def _config(spec: dict, backend: str = "own") -> dict:
    config = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    config["dials"] = {"t": spec}
    config["train"]["backend"] = backend
    return config


def test_the_toy_is_a_config_arm_with_its_own_checked_field(toy):
    arm = read_arm({"preset": "grpo", "toy_cap": 1.0})
    assert arm.dial.toy_cap == 1.0 and read_arm({"preset": "toy_cap"}).dial == arm.dial
    assert "toy_cap" in dial_settings() and Dial().toy_cap is None
    with pytest.raises(ValueError, match=r"toy_cap must be a finite number > 0, got -1"):
        read_arm({"toy_cap": -1})
    # the advantage: one right of four, GRPO's A = (0.75, -0.25 x 3) / 0.433 = 1.732, -0.577
    r = torch.tensor([1.0, 0.0, 0.0, 0.0], dtype=torch.float64)
    got = advantages(r, torch.zeros(4, dtype=torch.long), arm.dial.replace(eps=0.0))
    assert got.tolist() == pytest.approx([1.0, -1 / math.sqrt(3)] + [-1 / math.sqrt(3)] * 2)


def _door(config: dict) -> str | None:
    """The config's one door at DAG build: the first problem's line, or None."""
    try:
        open_plan(config, [REPO / "config" / "config.yaml"], REPO, REPO.parent)
    except ConfigError as error:
        return str(error)
    return None


def test_the_generated_schema_takes_the_toy_field_and_the_door_refuses_a_bad_value(toy):
    schema = read_schema(SCHEMA)
    entry = schema["properties"]["dials"]["additionalProperties"]["properties"]
    assert entry["toy_cap"]["exclusiveMinimum"] == 0.0 and "toy_cap" in entry["preset"]["enum"]
    assert entry["toy_cap"]["description"].startswith("Cap every advantage's size")
    assert _door(_config({"preset": "grpo", "toy_cap": 0.5})) is None
    assert _door(_config({"preset": "grpo", "toy_cap": "big"})) == (
        "config error at 'dials.t.toy_cap': toy_cap must be a number, got 'big' (str)"
    )


def test_without_the_toy_its_field_is_refused():
    error = _door(_config({"toy_cap": 0.5}))
    assert error is not None and "unknown dial key 'toy_cap'" in error


def test_the_trl_backend_refuses_the_toy_by_name(toy):
    arms = {"t": read_arm({**TRL, "toy_cap": 0.5}, max_new_tokens=40, backend="trl")}
    assert backend_error(arms, 40) == (
        "config error at 'dials.t.toy_cap': the trl backend cannot train toy_cap = 0.5: "
        "TRL does not cap advantages (backend: own can; config/trl.yaml restates the default's "
        "arms for TRL)"
    )
    assert backend_error({"t": read_arm(TRL, backend="trl")}, 40) is None


def test_the_toy_has_a_label_and_a_logged_column_in_a_real_run(toy, base_dir, tmp_path):
    assert arm_name("toy_cap") == "Toy cap" == toy.label
    runs = pd.DataFrame({"dial": ["toy_cap", "grpo"], "seed": [3, 0]})  # a figure's labels: the
    # the stages pass display_names(), which holds the registered label
    assert decomposition_labels(runs, names=display_names()) == ["Toy cap, seed 3", "GRPO, seed 0"]
    assert table_columns()["steps"][-1] == "toy_responses"
    config = TrainConfig(
        steps=2, prompts_per_step=3, group_size=4, max_new_tokens=8, train_pool=20,
        heldout_prompts=6, eval_every=2, checkpoint_every=2, identity_every=0, progress=False,
    )  # fmt: skip
    outputs = {name: tmp_path / f"{name}.parquet" for name in ("steps", "responses")}
    dial = read_arm({"preset": "toy_cap", "toy_cap": 0.5}).dial
    train_run(base_dir, FakeTask(), dial, config, outputs, tmp_path / "ckpt")
    steps = pd.read_parquet(outputs["steps"])
    assert steps["toy_responses"].tolist() == [12.0, 12.0]  # 3 prompts x 4 responses a step
    responses = pd.read_parquet(outputs["responses"])
    assert responses["advantage"].abs().max() <= 0.5 + 1e-12  # the toy capped every one

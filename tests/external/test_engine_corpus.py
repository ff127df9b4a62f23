"""Every saved config of the corpus (tests/external/engine_configs/, written from each release's
own wheel by tools/engine_configs.py) named right: the estimator, the normalizer with its
constant, the filtering and the release. The expected values are read off the engines' source
per release range (docs/estimators.md), not from the code under test."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from grpo_dial.external.engine_options import read_run
from grpo_dial.external.engine_releases import RELEASES, release_key
from grpo_dial.external.run_estimator import run_estimator

CORPUS = Path(__file__).parent / "engine_configs"


def _line(*paths: Path, version: str | None = None) -> str:
    return run_estimator(read_run(list(paths)), version=version)[1]


def _releases(engine: str) -> list[str]:
    return sorted((p.name for p in (CORPUS / engine).iterdir()), key=release_key)


def test_the_corpus_holds_every_release_with_its_wheel_date():
    dates = json.loads((CORPUS / "corpus.json").read_text())["wheel_dates"]
    for engine, releases in RELEASES.items():
        assert _releases(engine) == list(releases)
        assert set(dates[engine]) == set(releases)
    # a year of releases: the newest and the oldest kept of each engine a year or more apart
    assert dates["trl"]["0.26.2"] < "2025-12-31" and dates["trl"]["1.16.0"] >= "2026-10-01"
    assert dates["verl"]["0.6.1"] < "2025-12-01" and dates["openrlhf"]["0.9.0"] < "2025-12-01"


@pytest.mark.parametrize("release", RELEASES["trl"])
@pytest.mark.parametrize("form", ["config.json", "repr.txt"])
def test_trl_defaults_with_their_nulls(release, form):
    # every default TRL run: scale_rewards group, loss_type dapo, epsilon_high null (= epsilon)
    path = CORPUS / "trl" / release / form
    assert ("epsilon_high=None" if form == "repr.txt" else '"epsilon_high": null') in (
        path.read_text()
    )
    table, line = run_estimator(read_run([path]))
    assert line.startswith("trl: GRPO with length_norm changed; as a dial: {preset: grpo, "
                           "std_ddof: 1, eps: 0.0001, length_norm: token, clip_low: 0.2, "
                           "clip_high: 0.2}; filtering: none"), line  # fmt: skip
    limit = table.set_index("option").loc["max_completion_length", "value"]
    assert limit == ("512" if release_key(release) >= (1, 10) else "256")


@pytest.mark.parametrize("release", RELEASES["trl"])
def test_trl_dr_grpo_run_takes_its_releases_completion_limit(release):
    # grpo.yaml says dr_grpo but not max_completion_length: the release's default divides
    line = _line(CORPUS / "trl" / release / "run")
    limit = 512 if release_key(release) >= (1, 10) else 256
    assert line.startswith("trl: Dr. GRPO; as a dial: {preset: grpo, std_ddof: 1, eps: 0.0001, "
                           f"std_power: 0.0, length_norm: constant, max_length: {limit}, "
                           "clip_low: 0.2, clip_high: 0.2}; filtering: none; "
                           "mask_truncated_completions: truncated"), line  # fmt: skip
    assert line.endswith(f"release {release} ({CORPUS / 'trl' / release / 'run' / 'README.md'})")


VERL_FOUND = {"0.5.0": "0.6.0", "0.6.0": "0.6.0", "0.6.1": "0.6.1", "0.7.0": "0.7.0",
              "0.7.1": "0.7.1", "0.8.0": "0.8.0", "0.9.0": "0.9.0", "0.9.1": "0.9.0"}  # fmt: skip


@pytest.mark.parametrize("release", RELEASES["verl"])
def test_verl_shipped_defaults_are_gae_and_name_their_release(release):
    line = _line(CORPUS / "verl" / release / "defaults.yaml")
    assert line.startswith("verl: adv_estimator='gae' (verl) has no dial setting; release "
                           f"{VERL_FOUND[release]} (or "), line  # fmt: skip


@pytest.mark.parametrize("release", RELEASES["verl"])
def test_verl_seq_mean_token_sum_norm_divides_per_release(release):
    # loss_scale_factor null (or absent before 0.7.0): L is the padded width. Up to 0.7.0 verl
    # divides the token sum by L alone; from 0.7.1 by B x L (Dr. GRPO's constant).
    line = _line(CORPUS / "verl" / release / "grpo_norm")
    head = ("verl: GRPO with length_norm changed; as a dial: {preset: grpo, std_ddof: 1, "
            "eps: 1e-06, singleton: reward, empty_rows: skip, ")  # fmt: skip
    if release_key(release) >= (0, 7, 1):
        assert line.startswith(head + "length_norm: constant, max_length: None, clip_low: 0.2, "
                               "clip_high: 0.2}; filtering: none; release"), line  # fmt: skip
    else:
        assert line.startswith(head + "length_norm: sum, clip_low: 0.2, clip_high: 0.2}; "
                               "filtering: none; verl"), line  # fmt: skip
        assert "divides the token sum by L = the padded width alone" in line


def test_verl_full_composed_config_reads_past_its_namesakes():
    # the whole 0.9.1 config: distillation's loss_mode k3 and clip ratios, rollout_correction's
    # loss_type, critic's interpolated loss_agg_mode: none of them is the actor's option
    path = CORPUS / "verl" / "0.9.1" / "full" / ".hydra" / "config.yaml"
    text = path.read_text()
    assert "loss_mode: k3" in text and "loss_type: ppo_clip" in text and "${oc.select" in text
    assert _line(path) == _line(CORPUS / "verl" / "0.9.1" / "grpo_norm")
    assert _line(path, version="0.7.0").split("; release")[0].endswith("scaled by 1/L")


@pytest.mark.parametrize("release", RELEASES["verl"])
def test_verl_dapo_recipe_drops_silent_groups(release):
    line = _line(CORPUS / "verl" / release / "dapo")
    expected = ("verl: DAPO; as a dial: {preset: grpo, std_ddof: 1, eps: 1e-06, singleton: "
                "reward, empty_rows: skip, length_norm: token, clip_low: 0.2, clip_high: 0.28, "
                "silent: drop, max_resample_rounds: 9}; filtering: silent groups dropped")
    assert line.startswith(expected), line


@pytest.mark.parametrize("release", [r for r in RELEASES["verl"] if release_key(r) >= (0, 7, 1)])
def test_verl_gdpo_over_several_reward_keys_has_no_dial(release):
    line = _line(CORPUS / "verl" / release / "gdpo")
    expected = ("verl: adv_estimator='gdpo' over gdpo_reward_keys=[accuracy_reward, "
                "format_reward] (several rewards) has no dial setting")
    assert line.startswith(expected), line


@pytest.mark.parametrize("release", RELEASES["openrlhf"])
def test_openrlhf_arguments_before_and_after_0_10_2(release):
    path = CORPUS / "openrlhf" / release / "train.sh"
    new = release_key(release) >= (0, 10, 2)
    assert ("--algo.advantage.estimator" in path.read_text()) is new
    line = _line(path)
    expected = ("openrlhf: DAPO; as a dial: {preset: grpo, std_ddof: 1, eps: 1e-09, length_norm: "
                "token, clip_low: 0.2, clip_high: 0.28, silent: drop}; filtering: silent groups "
                "dropped and refilled; release ")
    assert line.startswith(expected), line
    assert line.endswith("0.10.2 (or later, by its argument names)" if new
                         else "0.10.1.post2 (or earlier, by its argument names)")  # fmt: skip

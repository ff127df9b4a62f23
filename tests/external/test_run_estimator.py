"""Which estimator a logged run used (external.run_estimator): engine options read from config
and log files the test writes (TRL YAML and argparse repr, verl Hydra config and overrides,
OpenRLHF command line), mapped to the dial, built and named by its nearest preset."""

from __future__ import annotations

import pytest
from external_fixtures import write_trl_run

from grpo_dial.core.dial import dial_from_config
from grpo_dial.external.run_estimator import nearest_preset, read_engine_options, run_estimator
from grpo_dial.tools.cli import main

VERL_HYDRA = """\
algorithm:
  adv_estimator: rloo
  norm_adv_by_std_in_grpo: true
actor_rollout_ref:
  actor:
    loss_agg_mode: seq-mean-token-sum-norm
    loss_scale_factor: 1024
    clip_ratio_low: 0.2
    clip_ratio_high: 0.28
    policy_loss:
      loss_mode: gspo
"""


def _estimate(tmp_path, name, text, fmt=None):
    path = tmp_path / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return run_estimator(read_engine_options([path]), fmt)


def test_trl_yaml_batch_std_and_luspo(tmp_path):
    table, line = _estimate(tmp_path, "grpo.yaml", "scale_rewards: batch\nloss_type: luspo\n"
                            "importance_sampling_level: sequence\nepsilon: 0.0003\n")  # fmt: skip
    assert line.startswith("trl: batch std with ratio_level, length_norm changed; as a dial: ")
    assert "std_scope: batch" in line and "length_norm: sequence_sum" in line
    assert "ratio_level: sequence" in line and "clip_high: 0.0003" in line
    row = table.set_index("option").loc["scale_rewards"]
    assert row["value"] == "batch" and row["dial"] == "std_scope: batch"


def test_trl_defaults_fill_what_the_log_does_not_say(tmp_path):
    # an argparse-style repr in a log line; loss_type is TRL 1.16's default 'dapo'
    table, line = _estimate(tmp_path, "train.log",
                            "GRPOConfig(scale_rewards='none', num_generations=8)")  # fmt: skip
    dial = dial_from_config({"preset": "grpo", "std_power": 0.0, "length_norm": "token"})
    assert nearest_preset(dial) == ("dr_grpo", ["length_norm"])
    assert line.startswith("trl: Dr. GRPO with length_norm changed")
    assert "std_power: 0.0, length_norm: token, clip_low: 0.2, clip_high: 0.2}" in line
    t = table.set_index("option")
    assert t.loc["loss_type", "source"] == "default" and t.loc["loss_type", "value"] == "dapo"
    assert t.loc["scale_rewards", "source"].endswith("train.log")


def test_verl_hydra_config_is_rloo_with_gspo_ratio(tmp_path):
    table, line = _estimate(tmp_path, "out/.hydra/config.yaml", VERL_HYDRA)
    assert line.startswith("verl: RLOO with ratio_level, length_norm changed; as a dial:")
    for part in ("preset: rloo", "singleton: reward", "length_norm: constant", "max_length: 1024",
                 "ratio_level: sequence", "clip_high: 0.28", "empty_rows: skip"):  # fmt: skip
        assert part in line
    # the run folder is read: a directory finds .hydra/config.yaml
    _, again = run_estimator(read_engine_options([tmp_path / "out"]))
    assert again == line


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("python -m verl.trainer.main_ppo algorithm.adv_estimator=grpo "
         "algorithm.norm_adv_by_std_in_grpo=False", "verl: Dr. GRPO with length_norm changed"),
        ("algorithm.adv_estimator=reinforce_plus_plus_baseline",
         "verl: REINFORCE++ baseline with length_norm changed"),
        ("algorithm.adv_estimator=gpg actor_rollout_ref.actor.loss_agg_mode=seq-mean-token-mean",
         "verl: GPG;"),
        ("deepspeed --module openrlhf.cli.train_ppo_ray --advantage_estimator reinforce_baseline "
         "--eps_clip 0.2", "openrlhf: REINFORCE++ baseline;"),
        ("algorithm.adv_estimator=gdpo", "verl: GDPO (one reward) with length_norm changed"),
        ("algorithm.adv_estimator=remax", "verl: adv_estimator='remax' (verl) has no dial setting"),
        ("loss_type: cispo", "trl: loss_type='cispo' (TRL) has no dial setting"),
        ("hello", "no engine option found in the run's files"),
    ],
)  # fmt: skip
def test_command_lines_and_values_without_a_dial(tmp_path, text, expected):
    _, line = _estimate(tmp_path, "run.sh", text)
    assert line.startswith(expected), line


def test_conflicting_values_name_both_sources(tmp_path):
    (tmp_path / "a.yaml").write_text("loss_type: dapo\n")
    (tmp_path / "b.log").write_text('{"loss_type": "grpo"}\n')
    _, line = run_estimator(read_engine_options([tmp_path]))
    assert line.startswith("conflicting values of loss_type: dapo (") and "grpo (" in line
    assert line.endswith("no estimator named")
    with pytest.raises(ValueError, match="engine config .*nope.yaml does not exist"):
        read_engine_options([tmp_path / "nope.yaml"])


def test_diagnose_says_which_estimator_the_run_used(tmp_path, capsys, monkeypatch):
    run = write_trl_run(tmp_path / "trl_out")
    (run / "config.yaml").write_text("loss_type: grpo\nscale_rewards: group\n")
    monkeypatch.chdir(tmp_path)
    assert main(["diagnose", str(run), "--format", "trl", "--n-boot", "20"]) == 0
    out = capsys.readouterr().out
    assert "estimator: trl: GRPO; as a dial: {preset: grpo, std_ddof: 1, eps: 0.0001" in out
    assert (tmp_path / "grpo-dial-trl_out" / "estimator.csv").exists()

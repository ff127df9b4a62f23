"""Which estimator a logged run used (external.engine_options, external.run_estimator): engine
options read by their path from config and log files the test writes (TRL YAML, JSON and repr,
verl Hydra config, overrides and printed dict, OpenRLHF command lines, a wandb config), mapped to
the dial at the run's release, built and named by its nearest preset; values the engine would
refuse stop with one line naming option and file, before any table is written."""

from __future__ import annotations

import pytest
from external_fixtures import write_trl_run

from grpo_dial.core.dial import dial_from_config
from grpo_dial.external.engine_options import read_engine_options, read_run
from grpo_dial.external.run_estimator import nearest_preset, run_estimator
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


def _estimate(tmp_path, name, text, fmt=None, version=None):
    path = tmp_path / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return run_estimator(read_run([path]), fmt, version)


def test_trl_yaml_batch_std_and_luspo(tmp_path):
    table, line = _estimate(tmp_path, "grpo.yaml", "scale_rewards: batch\nloss_type: luspo\n"
                            "importance_sampling_level: sequence\nepsilon: 0.0003\n")  # fmt: skip
    assert line.startswith("trl: batch std with ratio_level, length_norm changed; as a dial: ")
    assert "std_scope: batch" in line and "length_norm: sequence_sum" in line
    assert "ratio_level: sequence" in line and "clip_high: 0.0003" in line
    row = table.set_index("option").loc["scale_rewards"]
    assert row["value"] == "batch" and row["dial"] == "std_scope: batch"


def test_trl_defaults_fill_what_the_log_does_not_say(tmp_path):
    # TrainingArguments' repr writes str(value): scale_rewards=none is the string, not null
    table, line = _estimate(tmp_path, "train.log",
                            "GRPOConfig(\nscale_rewards=none,\nnum_generations=8,\n)")  # fmt: skip
    dial = dial_from_config({"preset": "grpo", "std_power": 0.0, "length_norm": "token"})
    assert nearest_preset(dial) == ("dr_grpo", ["length_norm"])
    assert line.startswith("trl: Dr. GRPO with length_norm changed")
    assert "std_power: 0.0, length_norm: token, clip_low: 0.2, clip_high: 0.2}" in line
    assert line.endswith("release 1.16.0 (unknown: the newest release's defaults)")
    t = table.set_index("option")
    assert t.loc["loss_type", "source"] == "default" and t.loc["loss_type", "value"] == "dapo"
    assert t.loc["scale_rewards", "source"].endswith("train.log")


@pytest.mark.parametrize(
    ("text", "name"),
    [('{"loss_type": "dr_grpo", "epsilon": 0.2, "epsilon_high": null}', "config.json"),
     ("GRPOConfig(\nepsilon=0.2,\nepsilon_high=None,\nloss_type=dr_grpo,\n)", "args.txt"),
     ("loss_type: dr_grpo\nepsilon_high: ~\n", "grpo.yaml")],
)  # fmt: skip
def test_a_null_takes_the_engines_meaning(tmp_path, text, name):
    # epsilon_high null: TRL clips high at epsilon; the completion limit is the release's
    _, line = _estimate(tmp_path, name, text, version="1.9.2")
    assert "max_length: 256, clip_low: 0.2, clip_high: 0.2}" in line, line


def test_the_release_sets_the_default_normalizer(tmp_path):
    text = "loss_type: dr_grpo\nscale_rewards: none\n"
    for version, limit in (("1.9.2", 256), ("1.10.0", 512), ("v1.16.0", 512)):
        _, line = _estimate(tmp_path, "a.yaml", text, version=version)
        assert f"max_length: {limit}," in line and line.endswith("(--engine-version)")
    (tmp_path / "README.md").write_text("### Framework versions\n\n- TRL: 1.4.0\n")
    _, line = run_estimator(read_run([tmp_path]))
    assert "max_length: 256," in line and line.endswith(f"release 1.4.0 ({tmp_path}/README.md)")
    with pytest.raises(ValueError, match="--engine-version 'latest' is not a release number"):
        _estimate(tmp_path, "a.yaml", text, version="latest")
    _, line = _estimate(tmp_path, "b.yaml", "loss_type: luspo\n", version="0.27.2")
    assert line.startswith("trl: loss_type='luspo' is not in TRL 0.27.2 (from 0.28.0)")


@pytest.mark.parametrize(
    ("text", "option", "what"),
    [("epsilon: auto\n", "epsilon='auto'", "not a finite number >= 0"),
     ("epsilon: .nan\n", "epsilon='nan'", "not a finite number >= 0"),
     ('{"epsilon_high": "NaN"}', "epsilon_high='nan'", "not a finite number"),
     ("loss_type: dr_grpo\nmax_completion_length: 0\n", "max_completion_length='0'", "> 0"),
     ("loss_type: dr_grpo\nmax_completion_length: null\n", "max_completion_length='None'",
      "not a finite number > 0"),
     ("loss_type: bnpo\nper_device_train_batch_size: 0\n", "per_device_train_batch_size='0'",
      "> 0"),
     ("loss_type: dr_grpo\nmax_completion_length: 51.5\n", "max_completion_length='51.5'",
      "not a whole number"),
     # stated sizes are checked whether or not the dial uses them (loss_type dapo here)
     ("max_completion_length: 0\n", "max_completion_length='0'", "> 0"),
     ("per_device_train_batch_size: 0\n", "per_device_train_batch_size='0'", "> 0"),
     ("algorithm.adv_estimator=grpo actor_rollout_ref.rollout.n=0", "rollout.n='0'", "> 0"),
     ("--algo.advantage.estimator rloo --rollout.n_samples_per_prompt 0",
      "n_samples_per_prompt='0'", "> 0"),
     ("loss_type: sum\n", "loss_type='sum'", "not one of grpo, dapo"),
     ("algorithm.adv_estimator=grpo algorithm.norm_adv_by_std_in_grpo=maybe",
      "norm_adv_by_std_in_grpo='maybe'", "not true or false"),
     ("algorithm.adv_estimator=grpo actor_rollout_ref.actor.loss_agg_mode="
      "seq-mean-token-sum-norm actor_rollout_ref.actor.loss_scale_factor=0",
      "loss_scale_factor='0'", "> 0")],
)  # fmt: skip
def test_bad_values_stop_in_one_line_naming_option_and_file(tmp_path, text, option, what):
    name = "cfg.json" if text.startswith("{") else "cfg.yaml"
    with pytest.raises(ValueError) as err:
        _estimate(tmp_path, name, text)
    message = str(err.value)
    assert option in message and str(tmp_path / name) in message and what in message
    assert "\n" not in message


def test_diagnose_stops_before_writing_any_table(tmp_path, capsys, monkeypatch):
    run = write_trl_run(tmp_path / "trl_out")
    (run / "config.json").write_text('{"loss_type": "dr_grpo", "max_completion_length": 0}')
    monkeypatch.chdir(tmp_path)
    assert main(["diagnose", str(run), "--format", "trl", "--out", "diag", "--n-boot", "5"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == (f"grpo-dial: error: trl option max_completion_length='0' in "
                   f"{run / 'config.json'}: not a finite number > 0")  # fmt: skip
    assert not (tmp_path / "diag").exists()


def test_options_are_read_by_their_path(tmp_path):
    # verl's rollout_correction.loss_type is not TRL's loss_type; the distillation block's
    # loss_mode is not the actor's; critic's interpolation is no value
    text = VERL_HYDRA + """\
  rollout_correction:
    loss_type: ppo_clip
distillation:
  distillation_loss:
    loss_mode: k3
critic:
  loss_agg_mode: ${oc.select:actor_rollout_ref.actor.loss_agg_mode,token-mean}
"""
    text = text.replace("  norm_adv_by_std_in_grpo: true\n", "  norm_adv_by_std_in_grpo: true\n",)
    options = read_engine_options([_write(tmp_path, "c.yaml", text)])
    assert set(options["engine"]) == {"verl"}
    assert options.set_index("option").loc["loss_mode", "value"] == "gspo"
    assert "loss_type" not in set(options["option"])


def _write(tmp_path, name, text):
    path = tmp_path / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_verl_hydra_config_is_rloo_with_gspo_ratio(tmp_path):
    table, line = _estimate(tmp_path, "out/.hydra/config.yaml", VERL_HYDRA)
    assert line.startswith("verl: RLOO with ratio_level, length_norm changed; as a dial:")
    for part in ("preset: rloo", "singleton: reward", "length_norm: constant", "max_length: 1024",
                 "ratio_level: sequence", "clip_high: 0.28", "empty_rows: skip"):  # fmt: skip
        assert part in line
    # the run folder is read: a directory finds .hydra/config.yaml
    _, again = run_estimator(read_run([tmp_path / "out"]))
    assert again == line


def test_printed_configs_and_wandb_configs(tmp_path):
    # verl prints its resolved config with pprint; wandb saves {key: {desc, value}}
    printed = ("INFO config:\n{'actor_rollout_ref': {'actor': {'loss_agg_mode': "
               "'seq-mean-token-mean',\n  'policy_loss': {'loss_mode': 'vanilla'}},\n"
               " 'rollout': {'n': 8}},\n 'algorithm': {'adv_estimator': 'grpo_passk',\n"
               "  'norm_adv_by_std_in_grpo': False},\n 'distillation': {'loss_mode': 'k3'}}\n")
    _, line = _estimate(tmp_path, "train.log", printed)
    # pass@k without the std: nearer to Dr. GRPO and to pass@k alike; the estimator decides
    assert line.startswith("verl: pass@k advantage with std_power changed; as a dial: "
                           "{preset: grpo_passk, empty_rows: skip, std_power: 0.0, "
                           "length_norm: sequence,"), line  # fmt: skip
    wandb = "loss_type:\n  desc: null\n  value: bnpo\nper_device_train_batch_size:\n  value: 4\n"
    _, line = _estimate(tmp_path, "wandb/files/config.yaml", wandb)
    assert "length_norm: bnpo, bnpo_rows: 4" in line


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("python -m verl.trainer.main_ppo algorithm.adv_estimator=grpo "
         "algorithm.norm_adv_by_std_in_grpo=False", "verl: Dr. GRPO with length_norm changed"),
        # verl reads 1 / 0 as booleans: =1 is GRPO, =0 Dr. GRPO
        ("algorithm.adv_estimator=grpo algorithm.norm_adv_by_std_in_grpo=1",
         "verl: GRPO with length_norm changed; as a dial: {preset: grpo, std_ddof: 1, eps: 1e-06"),
        ("algorithm.adv_estimator=grpo algorithm.norm_adv_by_std_in_grpo=0",
         "verl: Dr. GRPO with length_norm changed"),
        ("algorithm.adv_estimator=reinforce_plus_plus_baseline",
         "verl: REINFORCE++ baseline with length_norm changed"),
        ("algorithm.adv_estimator=gpg actor_rollout_ref.actor.loss_agg_mode=seq-mean-token-mean",
         "verl: GPG;"),
        ("deepspeed --module openrlhf.cli.train_ppo_ray --advantage_estimator reinforce_baseline "
         "--eps_clip 0.2", "openrlhf: REINFORCE++ baseline with length_norm changed;"),
        ("--algo.advantage.estimator rloo --actor.loss_agg_mode seq-mean-token-mean "
         "--algo.dynamic_filtering_enable --algo.dynamic_filtering_range 0.1 0.9",
         "openrlhf: dynamic_filtering over the mean-reward range [0.1, 0.9] has no dial setting"),
        ("--algo.advantage.estimator flash_reinforce",
         "openrlhf: advantage_estimator='flash_reinforce' (OpenRLHF) has no dial setting"),
        ("algorithm.adv_estimator=gdpo", "verl: GDPO (one reward) with length_norm changed"),
        ("algorithm.adv_estimator=gdpo algorithm.gdpo_reward_keys=[acc]",
         "verl: GDPO (one reward) with length_norm changed"),
        ("algorithm.adv_estimator=remax", "verl: adv_estimator='remax' (verl) has no dial setting"),
        ("algorithm.adv_estimator=grpo +algorithm.filter_groups.enable=true",
         "verl: DAPO; as a dial: {preset: grpo, std_ddof: 1, eps: 1e-06, singleton: reward"),
        ("loss_type: cispo", "trl: loss_type='cispo' (TRL) has no dial setting"),
        ("multi_objective_aggregation: normalize_then_sum\n",
         "trl: GRPO with whiten, length_norm changed; as a dial: {preset: grpo, std_ddof: 1, "
         "eps: 0.0001, length_norm: token, clip_low: 0.2, clip_high: 0.2, whiten: response}"),
        ("multi_objective_aggregation: normalize_then_sum\nreward_weights: [1.0, 0.5]\n",
         "trl: multi_objective_aggregation='normalize_then_sum' (GDPO) over several rewards has "
         "no dial setting"),
        ("hello", "no engine option found in the run's files"),
    ],
)  # fmt: skip
def test_command_lines_and_values_without_a_dial(tmp_path, text, expected):
    _, line = _estimate(tmp_path, "run.sh", text)
    assert line.startswith(expected), line


def test_conflicting_values_name_both_sources(tmp_path):
    (tmp_path / "a.yaml").write_text("loss_type: dapo\n")
    (tmp_path / "b.log").write_text('{"loss_type": "grpo"}\n')
    _, line = run_estimator(read_run([tmp_path]))
    assert line.startswith("conflicting values of loss_type: dapo (") and "grpo (" in line
    assert line.endswith("no estimator named")
    with pytest.raises(ValueError, match="engine config .*nope.yaml does not exist"):
        read_engine_options([tmp_path / "nope.yaml"])
    # one value written two ways (1024 and 1024.0, True and true) is no conflict
    (tmp_path / "b.log").write_text('{"loss_type": "dapo", "epsilon": 0.2}\nepsilon=0.20\n')
    assert run_estimator(read_run([tmp_path]))[1].startswith("trl: GRPO with length_norm")


def test_diagnose_says_which_estimator_the_run_used(tmp_path, capsys, monkeypatch):
    run = write_trl_run(tmp_path / "trl_out")
    (run / "config.yaml").write_text("loss_type: grpo\nscale_rewards: group\n")
    monkeypatch.chdir(tmp_path)
    assert main(["diagnose", str(run), "--format", "trl", "--n-boot", "20",
                 "--engine-version", "1.3.0"]) == 0  # fmt: skip
    out = capsys.readouterr().out
    assert "estimator: trl: GRPO; as a dial: {preset: grpo, std_ddof: 1, eps: 0.0001" in out
    assert "release 1.3.0 (--engine-version)" in out
    assert (tmp_path / "grpo-dial-trl_out" / "estimator.csv").exists()

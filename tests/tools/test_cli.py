"""The grpo-dial command: plan prints the paper's numbers; bad arguments give one line, exit 2."""

from __future__ import annotations

import pandas as pd
import pytest
import yaml

from grpo_dial.tools.cli import main


def test_plan_prints_exact_and_closed_form_group_sizes(capsys):
    assert main(["plan", "--p", "0.05", "--fidelity", "0.9"]) == 0
    row = capsys.readouterr().out.splitlines()[-1].split()
    assert row[:5] == ["0.050", "42", "26.3", "26", "27"]


@pytest.mark.parametrize("value", ["0", "1", "1.5", "-0.2", "nan", "inf"])
def test_plan_refuses_a_pass_rate_outside_the_open_unit_interval(capsys, value):
    assert main(["plan", "--p", "0.3", value]) == 2
    out, err = capsys.readouterr()
    assert out == ""  # refused before the header
    shown = f"{float(value):g}"
    assert err == f"grpo-dial: error: --p must lie strictly between 0 and 1, got {shown}\n"


@pytest.mark.parametrize("value", ["1.0", "0", "1.2", "nan"])
def test_plan_refuses_a_fidelity_outside_the_open_unit_interval(capsys, value):
    assert main(["plan", "--p", "0.3", "--fidelity", value]) == 2
    out, err = capsys.readouterr()
    shown = f"{float(value):g}"
    assert out == ""
    assert err == f"grpo-dial: error: --fidelity must lie strictly between 0 and 1, got {shown}\n"


@pytest.mark.parametrize("value", ["0", "-3"])
def test_plan_refuses_a_group_size_below_1_before_the_header(capsys, value):
    assert main(["plan", "--p", "0.3", "--group-size", value]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err == f"grpo-dial: error: --group-size must be an integer >= 1, got {value}\n"


def test_plan_accepts_a_group_of_one(capsys):
    assert main(["plan", "--p", "0.3", "--group-size", "1"]) == 0
    assert capsys.readouterr().out.splitlines()[-1].split()[-2:] == ["0.000", "1.000"]


def test_stage_runs_outside_snakemake(tmp_path):
    params = tmp_path / "params.yaml"
    params.write_text(
        yaml.safe_dump(
            {
                "pass_rates": [0.5, 0.05],
                "fidelities": [0.9],
                "group_sizes": [4, 8],
                "p_grid_points": 9,
                "silent_deltas": [0.1],
            }
        )
    )
    outputs = {
        name: tmp_path / f"{name}.csv"
        for name in ("group_size", "grid", "weights", "silent_group_size")
    }
    code = main(
        [
            "stage",
            "theory_tables",
            "--params",
            str(params),
            "--output",
            *(f"{name}={path}" for name, path in outputs.items()),
        ]
    )
    assert code == 0
    table = pd.read_csv(outputs["group_size"]).set_index("p")["g_exact"]
    assert table[0.5] == 7 and table[0.05] == 42


def test_group_bias_stage_runs_outside_snakemake(tmp_path):
    params = tmp_path / "params.yaml"
    params.write_text(
        yaml.safe_dump(
            {
                "pass_rates": [0.1, 0.5],
                "group_sizes": [8],
                "anchor": None,
                "scale": 1.0,
                "n_groups": 1000,
                "seed": 0,
            }
        )
    )
    out = tmp_path / "group_bias.csv"
    assert main(["stage", "group_bias", "--params", str(params), "--output", f"table={out}"]) == 0
    table = pd.read_csv(out).set_index("p")
    assert table.loc[0.1, "anchor"] == 0.1 and table.loc[0.5, "bias"] == 0
    assert round(table.loc[0.1, "hadw_adv_correct"], 6) == 0.715473


def test_stage_with_a_missing_params_file_fails_in_one_line(tmp_path, capsys):
    assert main(["stage", "theory_tables", "--params", str(tmp_path / "none.yaml")]) == 2
    assert "params file not found" in capsys.readouterr().err


def test_memory_prints_the_predicted_peaks_of_a_config(capsys, monkeypatch):
    from conftest import REPO

    monkeypatch.chdir(REPO)  # the embedded default, config/config.yaml, is merged first
    assert main(["memory", "--configfile", "config/gpu.yaml"]) == 0
    out = capsys.readouterr().out
    lines = {line.split()[0]: line for line in out.splitlines()[1:]}
    assert set(lines) == {"update", "sampler", "passrate"}
    assert "24 GB: fits" in lines["update"] and "24 GB: fits" in lines["sampler"]
    assert main(["memory", "--configfile", "config/qwen_bigmath.yaml"]) == 0
    qwen = capsys.readouterr().out
    assert "24 GB: NO 80 GB: fits" in qwen.splitlines()[1]
    assert main(["memory", "--configfile", "no/such.yaml"]) == 2
    assert "config file not found" in capsys.readouterr().err


def test_length_bias_stage_runs_outside_snakemake(tmp_path):
    from grpo_dial.passrates.synthetic import synthetic_bigmath_like
    from grpo_dial.passrates.tables import write_passrates

    table = tmp_path / "table.parquet"
    write_passrates(synthetic_bigmath_like(n_prompts=200, n=64, seed=0)[0], table)
    params = tmp_path / "params.yaml"
    params.write_text(
        yaml.safe_dump(
            {
                "n_prompts": 64, "steps": 4, "lr": 4.0, "seeds": [0], "awareness": [0.0, 1.0],
                "core_length": 12, "initial_tail": 4.0, "groups_per_batch": 16,
                "arms": ["grpo", "dr_grpo"], "awareness_grid": [0.0, 1.0],
            }
        )
    )
    names = ("steps", "prompts", "summary", "fit", "curve")
    outputs = {name: tmp_path / f"{name}.csv" for name in names}
    args = ["stage", "length_bias", "--params", str(params), "--input", f"table={table}"]
    assert main([*args, "--output", *(f"{n}={p}" for n, p in outputs.items())]) == 0
    summary = pd.read_csv(outputs["summary"])
    assert set(summary["arm"]) == {"grpo", "dr_grpo"}


def test_version_prints_the_installed_version_and_exits_0(capsys):
    from importlib.metadata import version

    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert exit_.value.code == 0
    assert capsys.readouterr().out == f"grpo-dial {version('grpo-dial')}\n"


def test_version_falls_back_to_the_package_when_not_installed(capsys, monkeypatch):
    import importlib.metadata

    import grpo_dial

    def missing(name):
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "version", missing)
    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert exit_.value.code == 0
    assert capsys.readouterr().out == f"grpo-dial {grpo_dial.__version__}\n"


def _subcommands():
    import argparse

    from grpo_dial.tools.cli import build_parser

    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return sub.choices


def test_every_subcommand_shows_its_options_defaults_in_help():
    for name, parser in _subcommands().items():
        text = " ".join(parser.format_help().split())
        for action in parser._actions:
            if not action.option_strings or action.default in (None, "==SUPPRESS=="):
                continue
            if action.default is False or action.default == []:
                continue
            assert action.help, f"{name} {action.option_strings[0]} has no help"
            default = action.default
            shown = " ".join(map(str, default)) if isinstance(default, list) else str(default)
            assert f"(default: {shown})" in text, f"{name} {action.option_strings[0]}"
    plan_help = " ".join(_subcommands()["plan"].format_help().split())
    assert "(default: 0.9)" in plan_help and "(default: 8)" in plan_help


def test_diagnose_format_help_lists_its_choices():
    text = " ".join(_subcommands()["diagnose"].format_help().split())
    assert "trl, verl, generic" in text


def test_diagnose_into_a_reused_out_clears_only_the_files_it_owns(tmp_path, capsys, caplog):
    from external_fixtures import write_trl_run

    from grpo_dial.stages.external import DIAGNOSE_FILES

    run = write_trl_run(tmp_path / "run", steps=4, prompts=3)
    out = tmp_path / "out"
    out.mkdir()
    (out / "estimator.csv").write_text("option,value\nloss_type,grpo\n")  # an earlier run's
    (out / "notes.txt").write_text("mine")
    (out / "estimator.csv.bak").write_text("mine too")
    caplog.set_level("INFO", logger="grpo_dial")
    code = main(["diagnose", str(run), "--format", "trl", "--out", str(out), "--n-boot", "10"])
    assert code == 0
    assert "estimator: no engine option found" in capsys.readouterr().out
    assert not (out / "estimator.csv").exists()  # this run names no engine option
    assert (out / "notes.txt").read_text() == "mine"
    assert (out / "estimator.csv.bak").read_text() == "mine too"
    assert {p.name for p in out.iterdir()} == (
        set(DIAGNOSE_FILES) - {"estimator.csv"} | {"notes.txt", "estimator.csv.bak"}
    )
    assert f"cleared an earlier diagnosis from {out}: estimator.csv" in caplog.text


def test_diagnose_prints_the_expected_silent_share_its_figure_draws(tmp_path, capsys, monkeypatch):
    """Every step alike: prompt a 1 of 2 correct, b 2 of 2, c 0 of 2, over 10 steps. The figure's
    dashed curves (all correct + all wrong, unbiased at the run-wide pass rates) are flat, so
    the printed first-window expectation must equal their sum at any step: 0.8246, where the
    plug-in p^G + (1-p)^G would give 0.8333."""
    import grpo_dial.figures.external as external

    rows = [
        (step, prompt, "x" * (40 + (0 if ok else step)), ok)
        for step in range(1, 11)
        for prompt, oks in (("a", (1, 0)), ("b", (1, 1)), ("c", (0, 0)))
        for ok in oks
    ]
    log = tmp_path / "log.csv"
    pd.DataFrame(rows, columns=["step", "prompt", "response", "reward"]).to_csv(log, index=False)
    drawn = []
    draw = external.external_figure
    monkeypatch.setattr(
        external, "external_figure", lambda *a: drawn.append(draw(*a)) or drawn[-1]
    )
    columns = ["step=step", "prompt=prompt", "response=response", "reward=reward"]
    code = main(["diagnose", str(log), "--format", "generic", "--columns", *columns,
                 "--out", str(tmp_path / "out"), "--n-boot", "10"])  # fmt: skip
    assert code == 0
    printed = dict(line.split() for line in capsys.readouterr().out.splitlines()
                   if line.startswith("expected_silent_"))  # fmt: skip
    dashed = [line for line in drawn[0].axes[1].get_lines() if line.get_linestyle() == "--"]
    assert len(dashed) == 2  # all correct, all wrong
    at_first_step = sum(float(line.get_ydata()[0]) for line in dashed)
    assert printed["expected_silent_first"] == f"{at_first_step:.4g}" == "0.8246"
    assert printed["expected_silent_last"] == "0.8246"


def test_diagnose_writes_its_manifest_and_prints_it_first(tmp_path, capsys):
    """The manifest beside diagnose's outputs: its arguments as the config, those that differ
    from their defaults as the changes; the printed summary starts with the same header."""
    import json

    from external_fixtures import write_trl_run

    run = write_trl_run(tmp_path / "run", steps=4, prompts=3)
    out = tmp_path / "out"
    argv = ["diagnose", str(run), "--format", "trl", "--out", str(out), "--n-boot", "10"]
    assert main(argv) == 0
    lines = capsys.readouterr().out.splitlines()
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["config"]["n_boot"] == 10 and manifest["config"]["out"] == str(out)
    assert manifest["changes"] == ["n_boot: 10"]
    assert manifest["config_files"] == [] and manifest["packages"]["pandas"] == pd.__version__
    assert lines[0] == f"- Diagnosed: {run} (--format trl) into {out}"
    assert lines[1] == "- Engine config files: none"
    assert lines[2].startswith("- Commit: `")
    assert lines[3] == "- Settings that differ from the default: `n_boot: 10`"
    assert lines[5] == f"- Full record: [`{out / 'manifest.json'}`]({out / 'manifest.json'})"


def test_stage_with_missing_params_names_them_in_one_line(tmp_path, capsys):
    params = tmp_path / "params.yaml"
    params.write_text("pass_rates: [0.1]\ngroup_sizes: [4]\n")
    args = ["stage", "theory_tables", "--params", str(params), "--output", f"grid={tmp_path}/g"]
    assert main(args) == 2
    err = capsys.readouterr().err.strip()
    assert err == (  # not `code`: the rerun trigger run_rule drops never reaches a stage
        "grpo-dial: error: stage theory_tables: missing params fidelities, p_grid_points, "
        "silent_deltas; give them in the --params file (the rule's params: in workflow/rules)"
    )


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("pass_rates: [0.1]\n\tgroup_sizes: [4]\n", "not valid YAML: while scanning"),
        ("pass_rates: [0.1]\npass_rates: [0.2]\n", "key 'pass_rates' is given twice"),
        ("pass_rates: !!python/object:os.system {}\n",
         "the tag 'tag:yaml.org,2002:python/object:os.system' is not"),
    ],
)
def test_a_stage_params_file_is_read_as_config_files_are(tmp_path, capsys, text, fragment):
    params = tmp_path / "params.yaml"
    params.write_text(text)
    args = ["stage", "theory_tables", "--params", str(params), "--output", f"grid={tmp_path}/g"]
    assert main(args) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"grpo-dial: error: config error in {params}") and "\n" not in err
    assert fragment in err, err


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("train:\n  group_size: '8'\n", "config error at 'train.group_size': '8' is text"),
        ("train:\n\tgroup_size: 8\n", "not valid YAML"),
        ("train:\n  micro_batch: 0\n", "config error at 'train.micro_batch': 0 is less than"),
    ],
)
def test_memory_checks_the_config_as_the_dag_build_does(tmp_path, capsys, monkeypatch, text,
                                                        fragment):  # fmt: skip
    from conftest import REPO

    monkeypatch.chdir(REPO)
    overlay = tmp_path / "overlay.yaml"
    overlay.write_text(text)
    assert main(["memory", "--configfile", "config/gpu.yaml", str(overlay)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("grpo-dial: error: config error") and "\n" not in err
    assert fragment in err, err
    overlay.write_text("train:\n  micro_batch: 4\n")  # the valid neighbour
    assert main(["memory", "--configfile", "config/gpu.yaml", str(overlay)]) == 0


def test_the_memory_model_refuses_a_micro_batch_below_one():
    from grpo_dial.policy.memory import KNOWN, update_bytes

    with pytest.raises(ValueError, match="micro_batch=0 is not valid"):
        update_bytes(KNOWN["smollm2"], 8, 16, 16, micro_batch=0)
    assert update_bytes(KNOWN["smollm2"], 8, 16, 16, micro_batch=1)["peak"] > 0

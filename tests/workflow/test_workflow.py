"""The workflow: dry runs of the DAG, config validation, and the analysis rules end to end."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml
from conftest import REPO, SHARED_DATA

SNAKEMAKE = [sys.executable, "-m", "snakemake"]
PAPER_GROUP_SIZES = {
    (p, fidelity): cell
    for p, row in {
        0.50: [(7, 5), (11, 10), (51, 50)],
        0.30: [(9, 6), (14, 12), (61, 60)],
        0.10: [(22, 14), (36, 28), (144, 139)],
        0.05: [(42, 26), (69, 53), (273, 263)],
    }.items()
    for fidelity, cell in zip((0.9, 0.95, 0.99), row, strict=True)
}
ANALYSIS_RULES = {  # the analysis half: runs without a policy
    "passrates", "theory_tables", "identity_check", "group_bias", "estimator_tables",
    "difficulty_analysis", "simulate", "dapo_consistency", "theory_figures", "difficulty_figure",
    "simulation_figure", "dapo_figure", "length_bias", "length_bias_figure",
}  # fmt: skip


def tiny_config(results: Path) -> dict:
    """The embedded default shrunk to seconds: small tables, short simulation, few bootstraps."""
    config = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    config["results_dir"] = str(results)
    config["passrate_tables"]["synthetic"]["n_prompts"] = 3000
    config["theory"]["identity"]["n_groups"] = 2000
    config["theory"]["group_bias"]["n_groups"] = 2000
    config["simulate"].update(n_prompts=400, steps=25, tables=["synthetic"])
    config["dials"] = {}  # the analysis half only; the policy chain has its own smoke test
    config["dapo_consistency"]["n_boot"] = 20
    return config


def snakemake(workdir: Path, config: dict, *args: str) -> subprocess.CompletedProcess:
    config_path = workdir / "config.yaml"
    config_path.write_text(yaml.safe_dump(config))
    return subprocess.run(
        [
            *SNAKEMAKE,
            "--snakefile",
            str(REPO / "Snakefile"),
            "--directory",
            str(workdir),
            "--configfile",
            str(config_path),
            "--cores",
            "2",
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=900,
    )


def planned_jobs(stdout: str) -> dict[str, int]:
    """Rule -> count from the 'Job stats' table of a dry run."""
    lines = stdout.split("Job stats:")[1].splitlines()[3:]
    counts = {}
    for line in lines:
        parts = line.split()
        if len(parts) != 2 or parts[0] == "total":
            break
        counts[parts[0]] = int(parts[1])
    return counts


def test_default_dry_run_lists_every_analysis_job():
    result = subprocess.run(
        [*SNAKEMAKE, "-n", "--forceall", "--cores", "1"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    jobs = planned_jobs(result.stdout)
    assert ANALYSIS_RULES <= set(jobs)
    # synthetic and the two public logged-response tables (mirror or download: never skipped)
    assert jobs["passrates"] == 3
    # plus the base policy's own table from estimate_pass_rates
    assert jobs["difficulty_analysis"] == 4 and jobs["difficulty_figure"] == 4
    default = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    assert jobs["warm_start"] == 1 and jobs["estimate_pass_rates"] == 1
    assert jobs["train"] == len(default["dials"]) * len(default["train"]["seeds"])
    assert jobs["dapo_consistency"] == 1 and jobs["real_lengths"] == 1
    # data_mirror: auto reads ../shared/data when it is beside the repository, else downloads
    assert jobs.get("download", 0) == (0 if SHARED_DATA.exists() else 3)


@pytest.mark.parametrize(
    ("patch", "fragment"),
    [
        ({"simulate": {"steps": "many"}}, "config error at 'simulate.steps'"),
        # what the schema cannot see (grpo_dial.dag.config_checks)
        ({"model": {"device": "gpu"}}, "config error at 'model.device': 'gpu' is not a torch"),
        ({"train": {"seeds": [-1]}}, "config error at 'train.seeds.0': seed -1 is out of range"),
        ({"train": {"seeds": [10**19 + 1]}}, "config error at 'train.seeds.0': seed 1000000"),
        ({"train": {"lr": "1e-4"}}, "config error at 'train.lr': '1e-4' is text to YAML 1.1"),
        ({"train": {"steps": 5.0}}, "config error at 'train.steps': 5.0 must be an integer"),
        ({"length_bias": {"group_size": 1}}, "config error at 'length_bias.group_size': 1 gives"),
        ({"simulat": {}}, "'simulat' was unexpected"),
        ({"theory": {"group_bias": {"anchor": 2}}}, "config error at 'theory.group_bias.anchor'"),
        (  # the estimators' bad settings: each names its key
            {"dials": {"x": {"preset": "lambda_grpo", "lambda_r": 0}}},
            "config error at 'dials.x.lambda_r': lambda_r must be a finite number > 0, got 0",
        ),
        (
            {"dials": {"x": {"preset": "hadw_grpo", "anchor_rate": 1.5}}},
            "config error at 'dials.x.anchor_rate': anchor_rate must be in (0, 1], got 1.5",
        ),
        (
            {"dials": {"x": {"preset": "hadw_grpo", "anchor_rate": 0}}},
            "config error at 'dials.x.anchor_rate'",
        ),
        (
            {"dials": {"x": {"preset": "grpo", "strata": "check_lines"}}},
            "config error at 'dials.x.strata': stratum key 'check_lines' is not provided by task "
            "'arithmetic'; valid: truncated, length_bucket",
        ),
        (
            {"dials": {"x": {"preset": "lambda_grpo", "length_norm": "token"}}},
            "config error at 'dials.x': lambda_learnable needs length_norm='lambda'",
        ),
        ({"difficulty": {"allocation": {"signal": "loudest"}}}, "difficulty.allocation.signal"),
        ({"simulate": {"tables": ["missing"]}}, "unknown pass-rate table 'missing'"),
        (
            {"passrate_tables": {"x": {"kind": "math_cot", "path": "/nope.jsonl"}}},
            "input path not found: /nope.jsonl",
        ),
        (  # a typo'd path: refused at DAG build, before any hub lookup
            {"passrate_tables": {"x": {"kind": "bigmath", "path": "data/nothere.parquet"}}},
            "config error at 'passrate_tables.x.path': input path not found: data/nothere.parquet",
        ),
        (  # an old config's hub id in `path`: never looked up, the line says what to write
            {"passrate_tables": {"x": {"kind": "bigmath", "path": "open-r1/Big-Math"}}},
            "not found: open-r1/Big-Math (a local path; to read it from the Hugging Face hub, "
            "write hub: open-r1/Big-Math)",
        ),
        (
            {"passrate_tables": {"x": {"kind": "math_cot", "hub": "o/n"}}},
            "only kind bigmath reads the hub",
        ),
        (
            {"real_lengths": {"math_cot": {"public": "math_cot_100"}, "tokenizer": "o/tok"}},
            "config error at 'real_lengths.tokenizer': tokenizer directory not found: o/tok",
        ),
        # inputs that would corrupt or hang a run, or be refused only inside a job
        ({"train": {"seeds": [0, 0]}}, "config error at 'train.seeds': [0, 0] has non-unique"),
        ({"train": {"lr": float("nan")}}, "config error at 'train.lr': nan is not a finite"),
        ({"train": {"temperature": float("inf")}}, "config error at 'train.temperature': inf"),
        (
            {"model": {"spec": {"hidden_size": 130, "n_heads": 4}}, "dials": {"g": {}}},
            "config error at 'model.spec.n_heads': 4 heads do not divide hidden_size 130",
        ),
        (
            {"warm_start": {"style_weights": {"terse": 0, "worked": 0}}, "dials": {"g": {}}},
            "config error at 'warm_start.style_weights': every weight is 0",
        ),
        ({"dials": {"a" * 300: {}}}, "an arm's name is 1 to 64 letters"),
        ({"dials": {"grpo\n": {}}}, "config error at 'dials': the name 'grpo\\n' holds a control"),
        ({"runs": {1: {"format": "trl", "path": "x"}}}, "config error at 'runs': the name 1 is"),
        (
            {"runs": {"r": {"format": "generic", "path": "x", "columns": {"step": "s"}}}},
            "config error at 'runs.r.columns': must map step, prompt, response and reward or",
        ),
        ({"results_dir": "out\n"}, "config error at 'results_dir': 'out\\n' holds a control"),
        ({"task": {"name": "t" * 10**5}}, "unknown task '" + "t" * 199 + "... (100003 characters)"),
        (
            {"dials": {"a": {"group_size": "adaptive", "allocation": {"g_min": 1, "g_max": 1}}}},
            "config error at 'dials.a.allocation.g_max': 1 gives arm 'a' (group_size: adaptive)",
        ),
        (
            {"dials": {"t": {"preset": "grpo", "std_ddof": 1, "eps": 0.0001, "backend": "trl"}},
             "train": {"trl": {"processes": 3}}},
            "config error at 'train.trl.processes': prompts_per_step x group_size = ",
        ),
        (
            {"train": {"allocation": {"g_min": 9, "g_max": 4}}},
            "config error at 'train.allocation': g_max must be at least g_min = 9, got 4",
        ),
        (
            {"dials": None, "simulate": {"tables": ["synthetic", "base_policy"]}},
            "config error at 'simulate.tables': 'base_policy' is the trained policy's table, but "
            "no arm trains",
        ),
        ({"results_dir": "."}, "config error at 'results_dir': '.' is the working directory"),
        ({"results_dir": ""}, "config error at 'results_dir'"),
        ({"results_dir": str(REPO)}, "is the repository or a folder above it"),
        ({"results_dir": str(REPO.parent)}, "is the repository or a folder above it"),
        ({"results_dir": str(REPO / "src" / "out")}, "inside the repository's src/"),
        ({"resources_dir": "/"}, "config error at 'resources_dir'"),
        ({"task": {"options": {"operands": 9}}}, "config error at 'task.options.operands'"),
        ({"task": {"options": {"size": 2}}}, "unknown option 'size' for task 'arithmetic'"),
        ({"task": {"name": "math", "options": {"train": []}}}, "needs option(s): heldout"),
        ({"data_mirror": "/no/such/mirror"}, "config error at 'data_mirror': folder not found"),
        ({"passrate_tables": {"x": {"kind": "math_cot", "public": "nope"}}}, "unknown public file"),
        ({"offline": True, "data_mirror": None}, "offline: true, but public file"),
        (
            {"offline": True, "passrate_tables": {"b": {"kind": "bigmath", "hub": "o/n"}}},
            "config error at 'passrate_tables.b.hub': offline: true refuses hub access (o/n)",
        ),
        (
            {"dials": {"grpo": {"preset": "grpo"}}, "model": {"base": "Qwen/Qwen2.5-Math-1.5B"}},
            "config error at 'model.base': policy directory not found: Qwen/Qwen2.5-Math-1.5B "
            "(a local path; to read it from the Hugging Face hub, write base: hub:Qwen/",
        ),
        (
            {"offline": True, "dials": {"g": {"preset": "grpo"}}, "model": {"base": "hub:o/n"}},
            "config error at 'model.base': offline: true refuses hub access",
        ),
    ],
)
def test_bad_config_fails_before_any_job_with_one_line(tmp_path, patch, fragment):
    if patch.get("offline") and "data_mirror" not in patch and not SHARED_DATA.exists():
        # the default's public files would be refused first: offline needs them mirrored
        pytest.skip(f"offline: true needs the mirror {SHARED_DATA} for the default's public files")
    config = tiny_config(tmp_path / "results")
    for key, value in patch.items():
        if isinstance(value, dict) and isinstance(config.get(key), dict):
            config[key] = {**config[key], **value}
        else:
            config[key] = value
    result = snakemake(tmp_path, config, "-n")
    assert result.returncode != 0
    output = result.stdout + result.stderr
    assert any(fragment in line for line in output.splitlines()), output[-2000:]  # one line
    assert "Traceback" not in output
    assert not (tmp_path / "results").exists()


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("train:\n  steps: 5\n  steps: 50\n", "key 'steps' is given twice in one mapping"),
        ("dials:\n  grpo: {preset: grpo}\n  grpo: {preset: dapo}\n", "key 'grpo' is given"),
        # a 450-byte alias bomb: refused from the file, before anything walks the config
        (
            "a: &a [x, x, x, x, x, x, x, x, x]\n"
            + "".join(
                f"{c}: &{c} [*{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}]\n"
                for p, c in zip("abcdefghijkl", "bcdefghijklm", strict=True)
            )
            + "train: {steps: 1}\n",
            "YAML aliases (*name); a config file may use at most 100",
        ),
        ("model: {device: '" + "z" * 2**20 + "'}\n", "a config file may be at most 1048576 bytes"),
    ],
)
def test_duplicate_keys_in_a_config_file_fail_in_one_line_naming_it(tmp_path, text, fragment):
    overlay = tmp_path / "overlay.yaml"
    overlay.write_text(text)
    config = tiny_config(tmp_path / "results")
    result = snakemake(tmp_path, config, "-n", "--configfile", str(tmp_path / "config.yaml"),
                       str(overlay))  # fmt: skip
    output = result.stdout + result.stderr
    assert result.returncode != 0 and "Traceback" not in output
    assert any(fragment in x and str(overlay) in x for x in output.splitlines()), output[-2000:]


def test_a_merge_key_in_an_overlay_reaches_the_plan(tmp_path):
    """Snakemake's own loader and the DAG build's both read `<<: *grpo` as safe_load does."""
    overlay = tmp_path / "overlay.yaml"
    overlay.write_text(
        "dials:\n  grpo: &grpo {preset: grpo, std_ddof: 1}\n"
        "  grpo_token: {<<: *grpo, length_norm: token}\n"
    )
    config = tiny_config(tmp_path / "results")
    result = snakemake(tmp_path, config, "-n", "--configfile", str(tmp_path / "config.yaml"),
                       str(overlay))  # fmt: skip
    assert result.returncode == 0, (result.stdout + result.stderr)[-2000:]
    assert "dial=grpo_token" in result.stdout or "grpo_token/seed0" in result.stdout


def test_results_dir_that_is_a_file_or_starts_with_a_tilde(tmp_path, monkeypatch):
    """A file is refused in one line; `~` is expanded as the check expands it, so no folder
    named '~' appears and the outputs land in the home folder."""
    (tmp_path / "taken").write_text("kept\n")
    result = snakemake(tmp_path, tiny_config(tmp_path / "taken"), "-n")
    output = result.stdout + result.stderr
    assert result.returncode != 0 and "Traceback" not in output
    line = "is a file, not a folder; give outputs a folder of their own"
    assert any(line in x and "config error at 'results_dir'" in x for x in output.splitlines())
    assert (tmp_path / "taken").read_text() == "kept\n"
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    result = snakemake(tmp_path, tiny_config("~/grpo-results"), "-n")
    assert result.returncode == 0, (result.stdout + result.stderr)[-2000:]
    assert f"{home}/grpo-results/theory/group_size_table.csv" in result.stdout
    assert not (tmp_path / "~").exists()


def test_dials_null_in_an_overlay_switches_every_built_in_arm_off(tmp_path):
    """`dials: {}` in an overlay merges into the arms below it (Snakemake's merge keeps them);
    `dials: null` is the documented way to train no built-in arm."""
    overlay = tmp_path / "overlay.yaml"
    config = tiny_config(tmp_path / "results")
    for text, trains in (("dials: {}\n", True), ("dials: null\n", False)):
        overlay.write_text(text)
        result = snakemake(tmp_path, config, "-n", "--configfile", str(REPO / "config" /
                           "config.yaml"), str(tmp_path / "config.yaml"), str(overlay))  # fmt: skip
        assert result.returncode == 0, (result.stdout + result.stderr)[-2000:]
        assert ("train" in planned_jobs(result.stdout)) == trains, text


def test_a_nested_key_from_the_command_line_arrives_as_text_and_says_so(tmp_path):
    """Snakemake's --config 'train={steps: 5}' passes '5' (text); the line points to an overlay
    file. (--config train.steps=5 stops in Snakemake's own parser: docs/configuration.md.)"""
    result = snakemake(tmp_path, tiny_config(tmp_path / "results"), "-n", "--config",
                       "train={steps: 5}")  # fmt: skip
    output = result.stdout + result.stderr
    assert result.returncode != 0 and "Traceback" not in output
    line = "config error at 'train.steps': '5' is text, not a number"
    assert any(line in x for x in output.splitlines()), output[-2000:]


def test_results_dir_dot_on_the_command_line_fails_in_one_line(tmp_path):
    (tmp_path / "finished.csv").write_text("kept\n")
    config = tiny_config(tmp_path / "results")
    result = snakemake(tmp_path, config, "-n", "--config", "results_dir=.")
    output = result.stdout + result.stderr
    assert result.returncode != 0 and "Traceback" not in output
    line = "config error at 'results_dir': '.' is the working directory or a folder above it"
    assert any(line in text for text in output.splitlines()), output[-2000:]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["config.yaml", "finished.csv"]
    assert (tmp_path / "finished.csv").read_text() == "kept\n"


def test_missing_optional_inputs_are_skipped_with_a_note(tmp_path):
    """`optional: true` on a local path (an explicit choice) still skips, with a note."""
    config = tiny_config(tmp_path / "results")
    config["passrate_tables"]["gsm8k_logged"] = {
        "kind": "gsm8k_solutions", "path": str(tmp_path / "absent.jsonl"), "optional": True,
    }  # fmt: skip
    config["dapo_consistency"].update(curve=str(tmp_path / "absent.csv"), optional=True)
    result = snakemake(tmp_path, config, "-n")
    assert result.returncode == 0, result.stderr
    assert "skipping" in result.stderr and "absent.jsonl" in result.stderr, result.stderr
    jobs = planned_jobs(result.stdout)
    assert "dapo_consistency" not in jobs


def test_public_files_are_downloaded_without_a_mirror_and_read_from_it_with_one(tmp_path):
    config = tiny_config(tmp_path / "results")
    config["data_mirror"] = None
    jobs = planned_jobs(snakemake(tmp_path, config, "-n").stdout)
    assert jobs["download"] == 3  # gsm8k_solutions, math_cot_100, dapo_fig3b
    assert jobs["passrates"] == 3 and jobs["dapo_consistency"] == 1
    gpu = yaml.safe_load((REPO / "config" / "gpu.yaml").read_text())
    with_gpu = {**config, "task": gpu["task"], "dials": {"grpo": {"preset": "grpo"}}}
    with_gpu["model"] = {**config["model"], "base": "tiny"}
    jobs = planned_jobs(snakemake(tmp_path, with_gpu, "-n").stdout)
    assert jobs["download"] == 6  # and GSM8K train / test, MATH-500 for the math task


def test_a_fresh_clone_without_shared_data_lists_the_downloads(tmp_path):
    """The repository copied where no shared/data sits beside it: data_mirror auto finds no
    mirror, so the embedded default's dry run lists one download per public file it reads, and
    nothing is skipped."""
    clone = tmp_path / "clone"
    clone.mkdir()
    skip = shutil.ignore_patterns("__pycache__", "*.egg-info", ".snakemake", "results", "resources")
    for name in ("Snakefile", "workflow", "config", "src"):
        copy = shutil.copytree if (REPO / name).is_dir() else shutil.copy2
        copy(REPO / name, clone / name, **({"ignore": skip} if copy is shutil.copytree else {}))
    result = subprocess.run(
        [*SNAKEMAKE, "-n", "--cores", "1", "--configfile", "config/config.yaml"],
        cwd=clone, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    jobs = planned_jobs(result.stdout)
    assert jobs["download"] == 3 and jobs["passrates"] == 3
    assert jobs["dapo_consistency"] == 1 and jobs["real_lengths"] == 1
    assert "skipping" not in result.stderr
    public = yaml.safe_load((REPO / "config" / "config.yaml").read_text())["public_data"]
    for name in ("gsm8k_solutions", "math_cot_100", "dapo_fig3b"):
        assert f"output: resources/{public[name]['file']}\n" in result.stdout, name


def test_a_mirror_copy_that_differs_from_its_pin_stops_the_dag_build(tmp_path, shared_data):
    config = tiny_config(tmp_path / "results")
    config["data_mirror"] = str(shared_data)
    jobs = planned_jobs(snakemake(tmp_path, config, "-n").stdout)
    assert "download" not in jobs and jobs["passrates"] == 3 and jobs["real_lengths"] == 1
    config["public_data"]["math_cot_100"]["sha256"] = "0" * 64
    result = snakemake(tmp_path, config, "-n")
    output = result.stdout + result.stderr
    assert result.returncode != 0 and "Traceback" not in output
    assert "checksum mismatch for public file 'math_cot_100' (data_mirror)" in output
    assert "expected " + "0" * 64 in output and not (tmp_path / "results").exists()


@pytest.mark.workflow
def test_rule_download_fetches_each_file_checked_and_atomically(tmp_path, shared_data):
    """Rule download over file:// URLs (the mirror's files as origins): each file lands checked;
    a checksum mismatch fails that job in one log line and leaves no file, the others kept."""
    config = tiny_config(tmp_path / "results")
    config["data_mirror"] = None
    for entry in config["public_data"].values():
        entry["url"] = (shared_data / entry["file"]).as_uri()
    config["public_data"]["dapo_fig3b"]["sha256"] = "0" * 64
    files = [f"resources/{e['file']}" for e in config["public_data"].values()]
    result = snakemake(tmp_path, config, "--keep-going", *files)
    assert result.returncode != 0
    for name, entry in config["public_data"].items():
        target = tmp_path / "resources" / entry["file"]
        if name == "dapo_fig3b":
            assert not target.exists()  # nor its temp file
            assert not target.parent.exists() or list(target.parent.iterdir()) == []
        else:
            source = shared_data / entry["file"]
            assert target.read_bytes() == source.read_bytes(), name
    log = tmp_path / "results/logs/download/dapo/dapo_fig3b_accuracy1_fraction.csv.log"
    errors = [line for line in log.read_text().splitlines() if "ERROR" in line]
    assert len(errors) == 1 and "checksum mismatch for file://" in errors[0], errors

    # offline: true refuses even a download named on the command line
    config["offline"] = True
    config["dapo_consistency"]["curve"] = None  # its file is missing: the DAG build would stop
    target = "resources/" + config["public_data"]["math500"]["file"]
    (tmp_path / target).unlink()
    result = snakemake(tmp_path, config, target)
    assert result.returncode != 0 and not (tmp_path / target).exists()
    log = tmp_path / "results/logs/download/math500/test.jsonl.log"
    assert "offline: true: not downloading file://" in log.read_text()


@pytest.mark.slow
@pytest.mark.workflow
def test_analysis_rules_end_to_end(tmp_path, shared_data):
    results = tmp_path / "results"
    result = snakemake(tmp_path, tiny_config(results))
    assert result.returncode == 0, result.stderr[-4000:]

    # the group-size table in results/ equals DESIGN 1.3: exact G (closed form rounded to nearest)
    table = pd.read_csv(results / "theory" / "group_size_table.csv").set_index(["p", "fidelity"])
    for (p, fidelity), (exact, nearest) in PAPER_GROUP_SIZES.items():
        assert table.loc[(p, fidelity), "g_exact"] == exact
        assert table.loc[(p, fidelity), "g_closed_form_nearest"] == nearest

    for name in ("synthetic", "gsm8k_logged", "math_cot_100"):
        summary = pd.read_csv(results / "difficulty" / name / "summary.csv")
        assert len(summary) > 0
        assert (results / "figures" / f"difficulty_{name}.png").stat().st_size > 10_000
    arms = pd.read_csv(results / "simulate" / "synthetic" / "summary.csv")["arm"]
    assert set(arms) == {"grpo", "dr_grpo", "dapo", "dr_grpo_lr_matched", "hadw", "hadw_prompt"}
    fit = pd.read_csv(results / "dapo" / "fit_summary.csv").set_index("model")
    assert fit.loc["closed_form", "n_params"] == 1
    bias = pd.read_csv(results / "theory" / "group_bias.csv").set_index(["p", "G"])
    assert bias.loc[(0.5, 8), "bias"] == pytest.approx(0, abs=1e-12)
    assert (bias.mc_baseline - bias.baseline).abs().max() < 0.05  # 2,000 groups per row
    identity = pd.read_csv(results / "theory" / "estimator_identity.csv")
    assert (identity["same_operation"] == identity["predicted_same"]).all()
    for figure in (
        "estimator_mass",
        "identity",
        "fidelity",
        "difficulty_weight",
        "silent_rate",
        "dapo_fit",
        "simulation_synthetic",
    ):
        assert (results / "figures" / f"{figure}.png").exists()
        assert (results / "figures" / f"{figure}.pdf").exists()
    assert (results / "logs" / "simulate" / "synthetic.log").read_text()

    # a second run has nothing to do: finished results are kept
    again = snakemake(tmp_path, tiny_config(results), "-n")
    assert "Nothing to be done" in again.stdout + again.stderr
    # the provenance: a changed setting reruns the summary alone (its params), naming the change
    manifest = json.loads((results / "manifest.json").read_text())
    assert manifest["config_files"][-1]["path"] == str(tmp_path / "config.yaml")
    assert "decompose.window_fraction: 0.1" not in manifest["changes"]
    changed = tiny_config(results)
    changed["decompose"]["window_fraction"] = 0.2
    rerun = snakemake(tmp_path, changed, "-n")
    assert planned_jobs(rerun.stdout) == {"summary": 1, "all": 1}
    assert "Params have changed since last execution" in rerun.stdout + rerun.stderr
    assert snakemake(tmp_path, changed).returncode == 0
    assert "`decompose.window_fraction: 0.2`" in (results / "summary.md").read_text()
    shutil.rmtree(tmp_path / ".snakemake", ignore_errors=True)

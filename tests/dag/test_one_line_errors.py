"""Whatever a config holds, the DAG build answers in one line naming the key: a long value is
cut (with its full length), a control character is written as its escape, a path too long for
the file system is a missing path, not an OSError; names have a length; a merge key is read as
safe_load reads it; a file over MAX_FILE_BYTES is not parsed. And every shipped config, with the
overlays its header and the docs run it with, still plans."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from grpo_dial.dag import MAX_LINE, SHOWN_CHARS, ConfigError, one_line
from grpo_dial.dag.config_checks import MAX_FILE_BYTES, file_problem
from grpo_dial.dag.config_files import layered_config, merge_config
from grpo_dial.dag.plan import open_plan

ROOT = Path(__file__).resolve().parents[2]
CONFIGS = ROOT / "config"
DEFAULT = CONFIGS / "config.yaml"
TRL = {"preset": "grpo", "std_ddof": 1, "eps": 0.0001, "backend": "trl"}


def _config(tmp_path: Path, patch: dict | None = None) -> dict:
    config = yaml.safe_load(DEFAULT.read_text())
    config["results_dir"] = str(tmp_path / "results")
    config["resources_dir"] = str(tmp_path / "resources")
    return merge_config(config, patch or {})


def _line(tmp_path: Path, patch: dict, files: tuple = ()) -> str:
    with pytest.raises(ConfigError) as info:
        open_plan(_config(tmp_path, patch), [DEFAULT, *files], ROOT, tmp_path)
    line = str(info.value)
    assert "\n" not in line and len(line) <= MAX_LINE + 20, line[:300]
    return line


def test_one_line_escapes_control_characters_and_cuts_long_runs():
    assert one_line("table 'a\nb'\tx\x1b") == "table 'a\\nb'\\tx\\x1b"
    word = "w" * (SHOWN_CHARS + 9)
    cut = f"at 'k': {'w' * SHOWN_CHARS}... (209 characters) is bad"
    assert one_line(f"at 'k': {word} is bad") == cut
    kept = "v" * (SHOWN_CHARS + 8)  # a value config_checks.shown already cut stays as it is
    assert one_line(f"x {kept} y") == f"x {kept} y"
    spaced = "a b " * 1000
    assert one_line(spaced) == spaced[:MAX_LINE] + "... (4000 characters)"
    assert str(ConfigError("one\ntwo")) == "one\\ntwo"


N = 10**6  # a value of a million characters, echoed by every kind of check
LONG = [
    ({"model": {"base": "/tmp/" + "x" * N}}, "config error at 'model.base': policy directory"),
    ({"task": {"name": "t" * N}}, "config error at 'task.name': unknown task 'ttt"),
    ({"task": {"options": {"o" * N: 1}}}, "config error at 'task.options.ooo"),
    ({"dials": {"g": {"preset": "p" * N}}}, "config error at 'dials.g': unknown preset 'ppp"),
    ({"dials": {"g": {"preset": "grpo", "std_power": "p" * N}}},
     "config error at 'dials.g.std_power': std_power must be a number"),  # the core's Setting
    ({"dials": {"g": {"preset": "grpo", "k" * N: 1}}}, "config error at 'dials.g': unknown dial"),
    ({"train": {"k" * N: 1}}, "config error at 'train': Additional properties are not allowed"),
    ({"simulate": {"tables": ["s" * N]}}, "config error: unknown pass-rate table 'sss"),
    ({"train": {"lr_match": {"enabled": True, "reference": "g" * N}}},
     "config error at 'train.lr_match.reference': 'ggg"),
    ({"dials": {"g": {"preset": "grpo", "allocation": {"signal": "s" * N}}}},
     "config error at 'dials.g.signal': signal='sss"),
    ({"runs": {"r": {"format": "generic", "path": "x", "columns": {"c" * N: "x"}}}},
     "config error at 'runs.r.columns': unknown field(s) ['ccc"),
]  # fmt: skip


@pytest.mark.parametrize(("patch", "start"), LONG)
def test_a_long_value_is_cut_wherever_its_line_is_made(tmp_path, patch, start):
    line = _line(tmp_path, patch)
    assert line.startswith(start), line[:300]
    assert re.search(r"\.\.\. \(100000\d characters\)", line), line[:400]
    assert len(line) < 900


@pytest.mark.parametrize(
    ("patch", "line"),
    [
        ({"simulate": {"tables": ["synthetic\n"]}},
         "config error: unknown pass-rate table 'synthetic\\n'; defined: ['gsm8k_logged', "
         "'math_cot_100', 'synthetic']"),
        ({"channel": {"reference": "grpo\n"}, "task": {"options": {"tail_checks": 2}}},
         "config error at 'channel.reference': 'grpo\\n' is not in dials ['dapo', 'dr_grpo', "
         "'grpo', 'grpo_adaptive', 'nostd_sequence', 'std_constant']"),
        ({"results_dir": "res\nults"},
         "config error at 'results_dir': 'res\\nults' holds a control character; give a plain "
         "folder name"),
        ({"resources_dir": "res\x00"},
         "config error at 'resources_dir': 'res\\x00' holds a control character"),
    ],
)  # fmt: skip
def test_a_control_character_is_shown_as_its_escape(tmp_path, patch, line):
    assert _line(tmp_path, patch).startswith(line)


@pytest.mark.parametrize(
    ("patch", "start"),
    [
        ({"model": {"base": "/x" * 5000}}, "config error at 'model.base': policy directory not"),
        ({"runs": {"r": {"format": "trl", "path": "/x" * 5000}}},
         "config error at 'runs.r.path': input path not found: /x/x"),
        ({"real_lengths": {"gsm8k": "/tmp", "tokenizer": "/x" * 5000}},
         "config error at 'real_lengths.tokenizer': tokenizer directory not found: /x/x"),
        ({"dials": {"t": TRL}, "train": {"trl": {"accelerate_config": "/x" * 5000}}},
         "config error at 'train.trl.accelerate_config': '/x/x"),
        ({"results_dir": "r" * 5000}, "config error at 'results_dir': 'rrr"),
    ],
)  # fmt: skip
def test_a_path_too_long_for_the_file_system_names_its_key(tmp_path, patch, start):
    line = _line(tmp_path, patch)  # an OSError (File name too long) before
    assert line.startswith(start) and "characters)" in line, line[:300]


@pytest.mark.parametrize("section", ["passrate_tables", "runs"])
def test_a_name_has_at_most_64_characters(tmp_path, section):
    entry = {"kind": "synthetic"} if section == "passrate_tables" else {
        "format": "trl", "path": str(tmp_path), "optional": True}  # fmt: skip
    line = _line(tmp_path, {section: {"n" * 65: entry}})
    assert line == f"config error at '{section}': '{'n' * 65}' is too long"
    config = _config(tmp_path, {section: {"n" * 64: entry}})  # beside the default's own
    open_plan(config, [DEFAULT], ROOT, tmp_path)


def test_a_merge_key_in_an_overlay_is_read_as_safe_load_reads_it(tmp_path):
    """The anchor on an arm, the merge in another (as Snakemake merges the file's contents over
    the default's); a top-level key that only holds an anchor is a key like any other."""
    overlay = tmp_path / "overlay.yaml"
    overlay.write_text(
        "dials:\n  grpo: &grpo {preset: grpo, std_ddof: 1}\n"
        "  grpo_token: {<<: *grpo, length_norm: token}\n"
    )
    config = _config(tmp_path, yaml.safe_load(overlay.read_text()))
    plan = open_plan(config, [DEFAULT, overlay], ROOT, tmp_path)
    assert plan.arm_fields["grpo_token"]["dial"]["std_ddof"] == 1
    assert plan.arm_fields["grpo_token"]["dial"]["length_norm"] == "token"
    assert plan.arm_fields["grpo"]["dial"]["length_norm"] == "sequence"
    overlay.write_text("base: &b {preset: grpo}\ndials:\n  m: {<<: *b, std_power: 0}\n")
    line = _line(tmp_path, yaml.safe_load(overlay.read_text()), (overlay,))
    assert line == "config error at '<top level>': Additional properties are not allowed " \
        "('base' was unexpected)"


def test_the_file_size_limit_is_checked_before_parsing(tmp_path):
    at = tmp_path / "at.yaml"
    head = "model: {device: '"
    at.write_text(head + "z" * (MAX_FILE_BYTES - len(head) - 3) + "'}\n")
    assert at.stat().st_size == MAX_FILE_BYTES == 2**20
    assert file_problem(at) is None
    over = tmp_path / "over.yaml"
    over.write_text(at.read_text() + "\n")
    assert file_problem(over) == (
        f"config error in {over}: the file is {MAX_FILE_BYTES + 1} bytes; a config file may be "
        f"at most {MAX_FILE_BYTES} bytes (keep data in files the config names)"
    )
    bad = tmp_path / "bad.yaml"
    bad.write_text("train: {steps: [\n" + " " * MAX_FILE_BYTES)  # not YAML: never parsed
    assert file_problem(bad).startswith(f"config error in {bad}: the file is ")


# Each shipped config as its header (and docs/configuration.md) runs it: the files in order, on
# the embedded default unless the run replaces it (--replace-workflow-config).
SHIPPED = [
    ("config.yaml",), ("config.yaml", "adaptive.yaml"), ("config.yaml", "engines_lm.yaml"),
    ("config.yaml", "estimators.yaml"), ("config.yaml", "full.yaml"),
    ("config.yaml", "gpu.yaml"), ("config.yaml", "gpu_trl.yaml"),
    ("config.yaml", "gpu_trl.yaml", "gpu_trl_8gpu.yaml"), ("config.yaml", "qwen_bigmath.yaml"),
    ("config.yaml", "trl.yaml"), ("smoke.yaml",), ("config.yaml", "smoke.yaml"),
    ("config.yaml", "smoke.yaml", "trl_compare.yaml"),
    ("length_aware.yaml",), ("length_aware.yaml", "length_aware_blind.yaml"),
    ("length_aware.yaml", "length_aware_full.yaml"),
    ("length_aware.yaml", "length_aware_long.yaml"),
    ("length_aware.yaml", "length_aware_sweep.yaml"),
    ("length_aware.yaml", "length_aware_sweep.yaml", "length_aware_sweep_small.yaml"),
    ("length_aware.yaml", "length_aware_sweep.yaml", "length_aware_sweep_powered.yaml"),
    ("length_aware.yaml", "length_aware_sweep.yaml", "length_aware_sweep_adamw.yaml"),
    ("length_aware.yaml", "length_aware_sweep.yaml", "length_aware_sweep_all_weights.yaml"),
    ("length_aware.yaml", "length_aware_sweep.yaml", "length_aware_smollm2.yaml"),
    ("length_aware.yaml", "length_aware_sweep.yaml", "length_aware_smollm2.yaml",
     "length_aware_smollm2_pilot.yaml"),
    ("length_channel.yaml",), ("length_channel.yaml", "length_channel_estimators.yaml"),
    ("length_channel.yaml", "length_channel_full.yaml"),
]  # fmt: skip


def test_every_shipped_config_is_in_a_combination():
    named = {name for files in SHIPPED for name in files}
    assert named == {path.name for path in CONFIGS.glob("*.yaml")}


@pytest.mark.parametrize("files", SHIPPED, ids="+".join)
def test_the_shipped_configs_plan(tmp_path, monkeypatch, files):
    monkeypatch.chdir(ROOT)  # relative paths (accelerate configs, data) as snakemake reads them
    config = layered_config(CONFIGS / name for name in files)
    config["results_dir"] = str(tmp_path / "results")
    config["resources_dir"] = str(tmp_path / "resources")
    plan = open_plan(config, [CONFIGS / name for name in files], ROOT, ROOT)
    assert plan.tables


def test_a_file_that_is_not_utf8_or_merges_a_scalar_is_one_line_naming_it(tmp_path):
    latin = tmp_path / "latin.yaml"
    latin.write_bytes(b"train: {steps: 5}\nresults_dir: r\xe9sultats\n")
    assert file_problem(latin) == (
        f"config error in {latin}: not UTF-8 text (byte 0xe9 at offset 32); save the file as UTF-8"
    )
    scalar = tmp_path / "scalar.yaml"
    scalar.write_text("dials:\n  g: {preset: grpo}\n  h: {<<: 5}\n")
    assert file_problem(scalar) == (
        f"config error in {scalar} (line 3): expected a mapping or list of mappings for merging, "
        "but found scalar"
    )
    tag = tmp_path / "tag.yaml"
    tag.write_text("x: !!python/name:os.system ''\n")
    assert file_problem(tag) == (
        f"config error in {tag} (line 1): the tag 'tag:yaml.org,2002:python/name:os.system' is not "
        "allowed; config files are read with a safe loader (plain values only)"
    )

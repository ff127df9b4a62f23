"""The device check's short text summary (device_check.txt), from its JSON: one to a few lines
per part, the numbers docs/real-data-and-gpu.md#the-device-check explains."""

from __future__ import annotations


def _fmt(x, digits: int = 3) -> str:
    if x is None:
        return "-"
    if isinstance(x, float):
        return f"{x:.{digits}g}"
    return str(x)


def _status(entry: dict) -> str | None:
    if entry.get("status") == "ok":
        return None
    return f"{entry.get('status', 'missing')}: {entry.get('error') or entry.get('reason', '')}"


def summary_lines(data: dict) -> list[str]:
    meta = data.get("meta", {})
    lines = [f"device check, {meta.get('started_utc', '?')}, device {meta.get('device')}"
             f"{' (tiny shapes)' if meta.get('tiny') else ''}, {meta.get('seconds', '?')} s"]
    for name, render in RENDER.items():
        entry = data.get(name)
        if entry is None:
            continue
        bad = _status(entry)
        if bad is not None:
            lines.append(f"{name}: {bad}")
            continue
        try:
            lines += [f"{name}: {line}" for line in render(entry)]
        except (KeyError, TypeError, ValueError) as error:  # a summary never hides the JSON
            lines.append(f"{name}: (not summarized: {error})")
    return lines


def _versions(e: dict) -> list[str]:
    return [f"torch {e['torch']}, CUDA {_fmt(e['cuda'])}, cuDNN {_fmt(e['cudnn'])}, "
            f"transformers {e['transformers']}, GPU {_fmt(e['gpu_name'])} "
            f"({_fmt(e['gpu_memory_gib'])} GiB)"]  # fmt: skip


def _lock(e: dict) -> list[str]:
    if e.get("resolved") is None:
        return [f"not resolved ({e['null']['resolved']})"]
    return [f"{e['asked']} -> {e['resolved']}, lock {_fmt(e.get('lock_file'))}, holder pid "
            f"matches {_fmt(e.get('holder_pid_matches'))}, a second process refused "
            f"{_fmt(e.get('second_process_refused'))}"]  # fmt: skip


def _sdpa(e: dict) -> list[str]:
    out = []
    for shape, row in e["shapes"].items():
        parts = []
        for backend, b in row["backends"].items():
            if b["accepted"]:
                mem = f", {b['peak_mib']} MiB" if b.get("peak_mib") is not None else ""
                parts.append(f"{backend} {b['ms']} ms{mem}")
            else:
                parts.append(f"{backend} refused")
        out.append(f"{shape} q{row['q']} kv{row['kv']} {e['dtype']}: default "
                   f"{_fmt(row.get('default_choice'))}; " + "; ".join(parts))  # fmt: skip
    return out


def _parity(e: dict) -> list[str]:
    out = []
    for precision in ("fp32", "bf16"):
        for pair, c in e[precision].items():
            out.append(f"{precision} {pair}: logits max |d| {_fmt(c['logits_max_abs'])}, "
                       f"log-prob max |d| {_fmt(c['logprob_max_abs'])}, gradient rel "
                       f"{_fmt(c['grad_rel'])}")  # fmt: skip
    c = e["bf16_vs_fp32_lean_sdpa"]
    out.append(f"bf16 vs fp32 log-probs (lean SDPA): mean |d| {_fmt(c['logprob_mean_abs'])}, "
               f"max {_fmt(c['logprob_max_abs'])}")  # fmt: skip
    return out


def _decode(e: dict) -> list[str]:
    out = []
    for name in ("sampler", "passrate_sampler"):
        case = e[name]
        if case["status"] != "ok":
            out.append(f"{name}: {_status(case)}")
            continue
        runs = ", ".join(f"every {r['alive_check_every']}: {r['tokens_per_s']} tok/s, peak "
                         f"{_fmt(r['peak_gib'])} GiB" for r in case["runs"])  # fmt: skip
        out.append(f"{name} {case['rows']} rows x {case['new_tokens']} tokens: {runs}; "
                   f"predicted {case['predicted_peak_gib']} GiB")  # fmt: skip
    return out


def _update(e: dict) -> list[str]:
    out = [f"{e['rows']} rows, {e['tokens']} tokens, every group mixed: {e['mixed_groups']}"]
    for r in e["runs"]:
        if r["status"] != "ok":
            out.append(f"micro_batch {r['micro_batch']}: {_status(r)}")
            continue
        ratios = [b["fused_over_measured"] for b in r["buckets"]
                  if b.get("fused_over_measured") is not None]  # fmt: skip
        span = f"{min(ratios)}-{max(ratios)}" if ratios else "-"
        ck = " +checkpointing" if r["checkpointing"] else ""
        out.append(
            f"micro_batch {r['micro_batch']}{ck}: {r['tokens_per_s']} tok/s, "
            f"{len(r['buckets'])} buckets, peak above static "
            f"{_fmt(r['peak_above_static_gib'])} GiB (predicted "
            f"{r['predicted_above_static_gib']}), per bucket predicted/measured {span}"
        )
    return out


def _train(e: dict) -> list[str]:
    out = [f"policy: {e['policy']}"]
    for name, p in e["presets"].items():
        if p["status"] != "ok":
            out.append(f"{name}: {_status(p)}")
            continue
        steps = "; ".join(f"loss {_fmt(s['loss'])} acc {_fmt(s['accuracy'])} mixed "
                          f"{_fmt(s['mixed_fraction'])}" for s in p["steps"])  # fmt: skip
        out.append(f"{name} ({p['seconds']} s): {steps}")
    r = e["resume"]
    if r["status"] != "ok":
        out.append(f"resume: {_status(r)}")
    else:
        out.append(f"resume vs uninterrupted: step tables equal {r['step_tables_equal']}, "
                   f"weights max |d| {_fmt(r['weights_max_abs_diff'])}")  # fmt: skip
    return out


def _trl(e: dict) -> list[str]:
    return [f"trl {e['trl']}: {e['global_step']} step in {e['seconds']} s on "
            f"{e['model_device']}, loss {_fmt(e.get('loss'))}, reward {_fmt(e.get('reward'))}"]


RENDER = {"versions": _versions, "lock": _lock, "sdpa": _sdpa, "parity": _parity,
          "decode": _decode, "update": _update, "train": _train, "trl": _trl}  # fmt: skip

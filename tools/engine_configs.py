"""Regenerate the corpus of saved engine configs under tests/external/engine_configs/ from the
engines themselves: one folder per release of TRL, verl and OpenRLHF listed in
grpo_dial.external.engine_releases.RELEASES, each written from that release's own wheel.

    python tools/engine_configs.py --cache /tmp/engine-wheels   # pip download --no-deps

- TRL: GRPOConfig's fields, AST-read from `trl/trainer/grpo_config.py` (defaults as declared;
  `per_device_train_batch_size` is TrainingArguments' 8), written as `to_json_string()` writes
  them (`config.json`: JSON, indent 2, null for None) and as its repr (`repr.txt`:
  `GRPOConfig(` + sorted `key=value,` lines, str() of each value); `run/` is a partial run
  config (`grpo.yaml`: dr_grpo, scale_rewards none, mask_truncated_completions) beside the
  model card's "Framework versions" block from the release's `templates/lm_model_card.md`.
- verl: `defaults.yaml`, the options' neighbourhood of the shipped
  `trainer/config/_generated_ppo_trainer.yaml` (interpolations, nulls and the distillation and
  rollout-correction blocks kept); run folders `grpo_norm/`, `dapo/` and (from 0.7.1) `gdpo/`
  whose `.hydra/config.yaml` is that config with Hydra's overrides applied and whose
  `.hydra/overrides.yaml` lists them, as a run saves them; for the newest release also `full/`,
  the whole composed config (every block, about 40 KB) with grpo_norm's overrides.
- OpenRLHF: `train.sh`, a launch line with the argument names the release's
  `cli/train_ppo_ray.py` parser declares (checked against it).

Only the fields diagnose reads, their neighbours that could be mistaken for them, and the
marker paths that name a release are kept: a few KB per release. `corpus.json` records each
release's wheel date. No network at test time: the tests read the written files only.
"""

from __future__ import annotations

import argparse
import ast
import json
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
from grpo_dial.external.engine_releases import RELEASES, VERL_COMPOSED, VERL_MARKERS  # noqa: E402

OUT = ROOT / "tests" / "external" / "engine_configs"
TRL_FIELDS = (
    "scale_rewards", "loss_type", "importance_sampling_level", "epsilon", "epsilon_high",
    "max_completion_length", "num_generations", "mask_truncated_completions",
    "multi_objective_aggregation", "reward_weights", "delta", "beta", "num_iterations",
    "steps_per_generation", "generation_batch_size", "top_entropy_quantile",
    "vllm_importance_sampling_correction", "max_prompt_length",
)  # fmt: skip
TRAINING_ARGUMENTS = {"per_device_train_batch_size": 8, "output_dir": None}
VERL_KEEP = (  # path prefixes kept from the shipped defaults
    "algorithm.", "actor_rollout_ref.actor.loss_", "actor_rollout_ref.actor.clip_ratio",
    "actor_rollout_ref.actor.policy_loss.", "critic.loss_", "distillation.distillation_loss.",
)  # fmt: skip
VERL_EXACT = {"actor_rollout_ref.rollout.n", "data.max_response_length", VERL_COMPOSED,
              *(m for _, m in VERL_MARKERS)}  # fmt: skip
VERL_RUNS = {
    "grpo_norm": ["algorithm.adv_estimator=grpo", "actor_rollout_ref.rollout.n=8",
                  "actor_rollout_ref.actor.loss_agg_mode=seq-mean-token-sum-norm"],
    "dapo": ["algorithm.adv_estimator=grpo", "actor_rollout_ref.rollout.n=16",
             "actor_rollout_ref.actor.clip_ratio_low=0.2",
             "actor_rollout_ref.actor.clip_ratio_high=0.28",
             "+algorithm.filter_groups.enable=True", "+algorithm.filter_groups.metric=acc",
             "+algorithm.filter_groups.max_num_gen_batches=10"],
    "gdpo": ["algorithm.adv_estimator=gdpo",
             "+algorithm.gdpo_reward_keys=[accuracy_reward,format_reward]"],
}  # fmt: skip
OPENRLHF_ARGS = (  # (old name, name from 0.10.2, value)
    ("advantage_estimator", "algo.advantage.estimator", "group_norm"),
    ("eps_clip_low_high", "actor.eps_clip_low_high", "0.2 0.28"),
    ("n_samples_per_prompt", "rollout.n_samples_per_prompt", "8"),
    ("dynamic_filtering", "algo.dynamic_filtering_enable", None),
    ("dynamic_filtering_reward_range", "algo.dynamic_filtering_range", "0 1"),
)


def wheel(cache: Path, engine: str, release: str) -> Path:
    found = sorted(cache.glob(f"{engine}-{release}-*.whl"))
    if not found:
        subprocess.run([sys.executable, "-m", "pip", "download", f"{engine}=={release}",
                        "--no-deps", "--only-binary", ":all:", "-d", str(cache), "-q"],
                       check=True)  # fmt: skip
        found = sorted(cache.glob(f"{engine}-{release}-*.whl"))
    return found[0]


def member(whl: Path, tail: str) -> tuple[str, str]:
    """(text, date) of the wheel's file whose path ends with `tail`."""
    with zipfile.ZipFile(whl) as z:
        info = next(i for i in z.infolist() if i.filename.endswith(tail))
        year, month, day = info.date_time[:3]
        return z.read(info).decode(), f"{year:04d}-{month:02d}-{day:02d}"


def trl_fields(source: str) -> dict:
    """GRPOConfig's declared defaults (AnnAssign with field(default=...) or a literal)."""
    cls = next(n for n in ast.parse(source).body
               if isinstance(n, ast.ClassDef) and n.name == "GRPOConfig")  # fmt: skip
    out = {}
    for st in cls.body:
        if not (isinstance(st, ast.AnnAssign) and isinstance(st.target, ast.Name) and st.value):
            continue
        value = st.value
        if isinstance(value, ast.Call) and getattr(value.func, "id", "") == "field":
            value = next((k.value for k in value.keywords if k.arg == "default"), None)
        try:
            out[st.target.id] = ast.literal_eval(value) if value is not None else None
        except ValueError:
            continue
    return out


def write_trl(cache: Path, release: str) -> str:
    whl = wheel(cache, "trl", release)
    source, date = member(whl, "trl/trainer/grpo_config.py")
    fields = {**TRAINING_ARGUMENTS, **trl_fields(source)}
    kept = {k: fields[k] for k in (*TRAINING_ARGUMENTS, *TRL_FIELDS) if k in fields}
    folder = OUT / "trl" / release
    (folder / "run").mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(kept, indent=2) + "\n")
    lines = "".join(f"{k}={v},\n" for k, v in sorted(kept.items()))
    (folder / "repr.txt").write_text(f"GRPOConfig(\n{lines})\n")
    run = {"loss_type": "dr_grpo", "scale_rewards": "none", "mask_truncated_completions": True}
    (folder / "run" / "grpo.yaml").write_text(yaml.safe_dump(run, sort_keys=False))
    card, _ = member(whl, "trl/templates/lm_model_card.md")
    block = card[card.index("### Framework versions"):].split("\n\n")[:2]
    versions = {"trl_version": release, "transformers_version": "4.57.1",
                "pytorch_version": "2.9.0", "datasets_version": "4.3.0",
                "tokenizers_version": "0.22.1"}  # fmt: skip
    text = re.sub(r"\{\{\s*(\w+)\s*\}\}", lambda m: versions.get(m.group(1), ""),
                  "\n\n".join(block))
    (folder / "run" / "README.md").write_text(text.strip() + "\n")
    return date


def _flat(node: object, prefix: str = "") -> dict:
    if isinstance(node, dict) and node:
        out = {}
        for k, v in node.items():
            out.update(_flat(v, f"{prefix}.{k}" if prefix else str(k)))
        return out
    return {prefix: node}


def _nest(flat: dict) -> dict:
    out: dict = {}
    for path, value in flat.items():
        node = out
        *parents, leaf = path.split(".")
        for p in parents:
            node = node.setdefault(p, {})
        node[leaf] = value
    return out


def _apply(flat: dict, override: str) -> None:
    path, value = override.lstrip("+").split("=", 1)
    parsed = yaml.safe_load(value)
    flat[path] = parsed


def write_verl(cache: Path, release: str) -> str:
    whl = wheel(cache, "verl", release)
    source, date = member(whl, "verl/trainer/config/_generated_ppo_trainer.yaml")
    flat = _flat(yaml.safe_load(source))
    kept = {p: v for p, v in flat.items() if p.startswith(VERL_KEEP) or p in VERL_EXACT}
    folder = OUT / "verl" / release
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "defaults.yaml").write_text(yaml.safe_dump(_nest(kept), sort_keys=False))
    runs = dict(VERL_RUNS)
    if release == RELEASES["verl"][-1]:  # the newest release's whole composed config, once
        runs["full"] = VERL_RUNS["grpo_norm"]
    for name, overrides in runs.items():
        if name == "gdpo" and "gdpo" not in member(whl, "verl/trainer/ppo/core_algos.py")[0]:
            continue
        run = dict(flat if name == "full" else kept)
        for o in overrides:
            _apply(run, o)
        hydra = folder / name / ".hydra"
        hydra.mkdir(parents=True, exist_ok=True)
        (hydra / "config.yaml").write_text(yaml.safe_dump(_nest(run), sort_keys=False))
        (hydra / "overrides.yaml").write_text(yaml.safe_dump(overrides))
    return date


def write_openrlhf(cache: Path, release: str) -> str:
    whl = wheel(cache, "openrlhf", release)
    source, date = member(whl, "openrlhf/cli/train_ppo_ray.py")
    declared = set(re.findall(r"add_argument\(\s*\"--([\w.]+)\"", source))
    parts = ["deepspeed --module openrlhf.cli.train_ppo_ray"]
    for old, new, value in OPENRLHF_ARGS:
        name = new if new in declared else old
        if name not in declared:
            raise SystemExit(f"openrlhf {release} declares neither --{old} nor --{new}")
        parts.append(f"--{name}" + (f" {value}" if value is not None else ""))
    folder = OUT / "openrlhf" / release
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "train.sh").write_text(" \\\n   ".join(parts) + "\n")
    return date


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cache", type=Path, required=True, help="where the wheels go")
    args = parser.parse_args(argv)
    args.cache.mkdir(parents=True, exist_ok=True)
    writers = {"trl": write_trl, "verl": write_verl, "openrlhf": write_openrlhf}
    dates = {e: {r: writers[e](args.cache, r) for r in RELEASES[e]} for e in writers}
    (OUT / "corpus.json").write_text(json.dumps({"wheel_dates": dates}, indent=2) + "\n")
    print(f"wrote {sum(map(len, dates.values()))} releases under {OUT}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

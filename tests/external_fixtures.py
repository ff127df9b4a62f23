"""Logged runs in exactly the formats TRL and verl write, for the bring-your-own-run tests.

A run of `steps` steps, `prompts` prompts per step, G responses each; a prompt's pass rate is
fixed; incorrect responses grow by `growth` characters per step, correct ones stay put.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd


def _rollouts(steps: int, prompts: int, group_size: int, growth: float, seed: int):
    rng = np.random.default_rng(seed)
    pass_rate = rng.uniform(0.05, 0.95, prompts * 3)  # (pool,)
    for step in range(1, steps + 1):
        chosen = rng.choice(len(pass_rate), prompts, replace=False)
        for j in chosen:
            correct = rng.random(group_size) < pass_rate[j]  # (G,)
            for ok in correct:
                length = 40 if ok else int(40 + growth * step + rng.integers(0, 5))
                yield step, f"What is {j} + {j}?", "x" * length, bool(ok)


def write_trl_run(directory: Path, steps=12, prompts=6, group_size=4, growth=3.0, seed=0) -> Path:
    """<directory>/completions/completions_<step>.parquet as GRPOTrainer(log_completions=True)."""
    out = directory / "completions"
    out.mkdir(parents=True, exist_ok=True)
    rows = pd.DataFrame(
        _rollouts(steps, prompts, group_size, growth, seed),
        columns=["step", "prompt", "completion", "correct"],
    )
    rows["accuracy_reward"] = rows.pop("correct").astype(float)
    rows["advantage"] = rows.groupby(["step", "prompt"])["accuracy_reward"].transform(
        lambda r: r - r.mean()
    )
    for step, frame in rows.groupby("step"):
        frame.to_parquet(out / f"completions_{step:05d}.parquet", index=False)
    return directory


def write_verl_run(directory: Path, steps=12, prompts=6, group_size=4, growth=3.0, seed=1) -> Path:
    """<directory>/<step>.jsonl as verl with trainer.rollout_data_dir set."""
    directory.mkdir(parents=True, exist_ok=True)
    lines: dict[int, list[str]] = {}
    for step, prompt, response, ok in _rollouts(steps, prompts, group_size, growth, seed):
        record = {"input": prompt, "output": response, "gts": "42",
                  "score": 1.0 if ok else 0.0, "step": step}  # fmt: skip
        lines.setdefault(step, []).append(json.dumps(record))
    for step, text in lines.items():
        (directory / f"{step}.jsonl").write_text("\n".join(text) + "\n")
    return directory


# --------------------------------------------------------------------------- verl, as its code does
# Reproduces the dict-building path of verl's dumps (read, not copied), at
#   volcengine/verl b178a3cd56f58b2d502255daba591e92833930a7 verl/trainer/ppo/ray_trainer.py:
#     396-421  _dump_generations: <dump_path>/<global_steps>.jsonl, keys input, output, gts, score,
#              step, plus every reward_extra_infos_dict key whose list has exactly n entries;
#     424-454  _log_rollout_data: training rows after the update (rollout_data_dir);
#     1454-1455 _balance_batch reorders the batch before that (a group's rows are not adjacent);
#     637, 655-663 _validate adds reward_extra_infos_dict["reward"] = the scores and dumps to
#              validation_data_dir, val_kwargs.n samples per prompt; 1330-1331 before training
#              (global_steps 0), 1622-1628 every test_freq steps after that step's rollout dump;
#   verl/workers/reward_manager/dapo.py 104-125: score = compute_score's "score" (extra keys
#     kept), plus overlong_reward = min(-(len - (max_len - buffer)) / buffer * factor, 0), logged
#     as overlong_reward / overlong when overlong_buffer.log;
#   verl/utils/reward_score/math_dapo.py 265-273: {"score": +-1.0, "acc": correct, "pred": ...};
#   verl-project/verl-recipe 48ea0a797fa29867ea0ad92aff7d284eec7d4be3 dapo/dapo_ray_trainer.py:
#     215-221  the extra infos of the *last* generation batch; 235-292 filter_groups keeps
#              prompts whose metric has std > 0, concatenates generation batches, cuts to
#              train_batch_size * n;
#     304-305  balance; 379-381 the dump: the extra-info lists (one generation batch long) fail the
#              length check, so acc / overlong_reward / overlong are not written.


def _dump(path: Path, step: int, rows: list[dict], extra: dict[str, list]) -> None:
    """_dump_generations: base keys, then extra keys whose length equals the batch's."""
    n = len(rows)
    base = {k: [r[k] for r in rows] for k in ("input", "output", "gts", "score")}
    base["step"] = [step] * n
    base |= {k: v for k, v in extra.items() if len(v) == n}
    lines = [json.dumps({k: v[i] for k, v in base.items()}, ensure_ascii=False) for i in range(n)]
    path.mkdir(parents=True, exist_ok=True)
    (path / f"{step}.jsonl").write_text("\n".join(lines) + "\n")


def _dapo_score(ok: bool, length: int, max_len: int, buffer: int, factor: float) -> dict:
    """math_dapo's score and acc, plus the DAPO reward manager's overlong penalty."""
    expected = max_len - buffer
    overlong = min(-(length - expected) / buffer * factor, 0.0)
    return {"score": (1.0 if ok else -1.0) + overlong, "acc": ok, "overlong_reward": overlong,
            "overlong": overlong < 0}  # fmt: skip


def verl_batch(rng, prompts: list[str], n: int, pass_rate: dict[str, float], max_len: int = 40):
    """One step's rows (prompt i's n responses adjacent, as batch.repeat(interleave=True)) and
    the reward manager's extra infos; lengths up to max_len, the last 10 an overlong buffer."""
    rows, extra = [], {"acc": [], "overlong_reward": [], "overlong": [], "pred": []}
    for prompt in prompts:
        for _ in range(n):
            ok = bool(rng.random() < pass_rate[prompt])
            length = int(rng.integers(5, max_len + 1))
            result = _dapo_score(ok, length, max_len, buffer=10, factor=1.0)
            rows.append({"input": prompt, "output": "y" * length, "gts": "7",
                         "score": result.pop("score")})  # fmt: skip
            for key, value in result.items():
                extra[key].append(value)
            extra["pred"].append("7" if ok else "3")
    return rows, extra


def _balance(rng, rows: list[dict], extra: dict[str, list]):
    """_balance_batch reorders the batch; the main trainer scores after it (infos aligned), the
    DAPO recipe before it (its infos, of another length, stay as they are)."""
    order = rng.permutation(len(rows))
    aligned = {k: [v[i] for i in order] for k, v in extra.items() if len(v) == len(rows)}
    return [rows[i] for i in order], extra | aligned


def write_verl_dumps(
    directory: Path,
    steps=6,
    prompts=4,
    n=4,
    seed=3,
    test_freq=0,
    val_n=2,
    same_dir=True,
    repeat_prompt=False,
    filter_groups=False,
) -> dict:
    """A verl run's rollout (and, test_freq > 0, validation) dumps; returns what the trainer
    knows: train rows per step, validation steps, its groups per step."""
    rng = np.random.default_rng(seed)
    pool = [f"Q{i}: what is {i} * 7?" for i in range(prompts * 4)]
    rates = {p: float(r) for p, r in zip(pool, rng.uniform(0.0, 1.0, len(pool)), strict=True)}
    rates[pool[0]], rates[pool[1]] = 1.0, 0.0  # some silent groups
    val_dir = directory if same_dir else directory.parent / (directory.name + "_val")
    truth = {"train": {}, "groups": {}, "val_steps": []}

    def validate(step: int) -> None:
        val_prompts = [f"V{i}: test" for i in range(3)]
        rows, extra = verl_batch(rng, val_prompts, val_n, {p: 0.5 for p in val_prompts})
        extra["reward"] = [r["score"] for r in rows]  # _validate, line 637
        _dump(val_dir, step, rows, extra)
        truth["val_steps"].append(step)

    if test_freq:
        validate(0)  # val_before_train
    for step in range(1, steps + 1):
        chosen = list(rng.choice(pool, prompts, replace=False))
        if repeat_prompt and step == 2:
            chosen[-1] = chosen[0]  # the dataset holds this problem twice
        rows, extra = verl_batch(rng, chosen, n, rates)
        groups = prompts
        if filter_groups:  # keep prompts whose scores vary; refill from more generation batches
            kept_rows, kept_prompts, batches = [], 0, 0
            while kept_prompts < prompts:
                batch_rows, extra = verl_batch(rng, list(rng.choice(pool, prompts * 2)), n, rates)
                batches += 1
                for i in range(0, len(batch_rows), n):
                    scores = [r["score"] for r in batch_rows[i : i + n]]
                    if np.std([s > -1.0 for s in scores]) > 0:
                        kept_rows += batch_rows[i : i + n]
                        kept_prompts += 1
            rows = kept_rows[: prompts * n]  # extra = the last batch's infos: longer than rows
        rows, extra = _balance(rng, rows, extra)
        _dump(directory, step, rows, extra)
        truth["train"][step], truth["groups"][step] = rows, groups
        if test_freq and (step % test_freq == 0 or step == steps):
            validate(step)
    return truth

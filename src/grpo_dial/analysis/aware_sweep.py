"""The aware tail's dose-response: the closed form tested across awareness (issue 35).

Levels (LEVELS): the mode's accuracies (P(right | "="), P(right | "~")) = (0.5, 0.5), (0.6, 0.4),
(0.7, 0.3), (0.8, 0.2), (0.9, 0.1) at estimate rate 1/2: pass rate 1/2 and awareness
a = 1 - 2 P(right | "~") = 0, 0.2, 0.4, 0.6, 0.8 (data/tasks/aware.py). Each level trains every arm
of the config from the same base policy, with SGD and with AdamW, one seed per run.

The base policy at step 0 (`base_responses`): responses of the base sampled as the trainer
samples them (the task's forced cores). `special_mass` is the softmax mass the sampler masks
(pad, bos, unk; policy/rollout/sample.py) at the tokens it drew.

SGD through the transformer (`tail_kernel`, `sgd_prediction`). A mode's tail parameter on the
transformer is its continue logit l = log P(continue) - log P(EOS) (the sampler's distribution),
averaged over the decision positions of that mode's responses (each tail token and the stop);
J_m = dl_m / dw (w: every weight) at the base. If every position of mode m moved with J_m, the
surrogate's gradient would be J_~ g_~ + J_= g_= (g_m: the tabular gradient of theta_m), and one
SGD step would move the tails by

    dtheta_~ = lr (K_ee E[u_w] + K_ec E[u_c]),   dtheta_= = lr (K_ec E[u_w] + K_cc E[u_c]),

K = the kernel of J (K_ee = J_~ . J_~, K_ec = J_~ . J_=, K_cc = J_= . J_=; k_diff = |J_~ - J_=|^2,
the part that can move one mode against the other) and E[u] the closed form
(core/length_drift.tail_drift) at the level's p and a and the base tails. Over S steps at the base
state: a first-order prediction, in theta; in tokens dT = T_base dtheta (E[T] = e^theta), in
L = log(1 + T): dL = q dtheta (q = T / (1 + T)). `sgd_rate` sizes SGD's learning rate so that this
predicts a contrast of SGD_TARGET (theta) for the reference arm at the reference level: the
closed form's magnitude can then be read off the runs directly. AdamW's rate is sized from the same
kernel: its first step moves every weight by about lr, so the tail's continue logit by up to
lr |J|_1, the same in both modes (the common direction dominates J); lr_adam = ADAM_STEP / |J|_1
keeps that move at ADAM_STEP. At the 0.005 - 0.01 of the aware study (|J|_1 about 180) it is
0.9 - 1.8 per step, and both modes' tails run to the cap or to nothing within tens of steps.

Adam (`push_snr`): each coordinate's step is about lr E[g] / sqrt(E[g^2]), so the prediction is
the push's signal-to-noise ratio per batch (analysis/aware_sim.push_moments, common random numbers
across arms; the forced core rounded to whole tokens), which sets the drift's size up to a scale
the transformer's many coordinates set; `pred_adam` is that drift if theta_m were one Adam
coordinate: S lr snr / sqrt(1 + snr^2) per mode.

The tail-frozen control (FROZEN): the reference arm's sampling and rewards with zero loss weight
on the tail. The task's core is forced and already weighted 0 (data/tasks/aware.py), so no token
keeps a weight: the gradient is 0, and SGD and AdamW (weight decay 0, no KL) take a zero step, which
`train_cell` runs as learning rate 0 (the same update; the step's grad_norm is still logged). It is
trained once, with AdamW at REFERENCE_LEVEL (a zero step depends on neither), and predicted 0: what
its tails do is what the measure does without any update, so every other arm's common drift
(d_common) beyond it is the updates' own.

`dose_table`: per optimizer, level, arm and quantity, the seed mean with its 90 % t interval, the
sign and Wilcoxon tests over seeds, the take-offs with Fisher's p against the same arm and
optimizer at a = 0, beside the predictions; `dose_fit` the measured-on-predicted slope, R^2 and
Spearman's rank correlation over levels and arms per optimizer.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd
from scipy import stats

from grpo_dial.analysis.aware import STEP_COLUMNS, fisher_p, rank_tests, run_drift, step_table
from grpo_dial.analysis.seed_stats import r_squared, t_interval

LEVELS = {
    "a0": (0.5, 0.5), "a20": (0.6, 0.4), "a40": (0.7, 0.3), "a60": (0.8, 0.2), "a80": (0.9, 0.1),
}  # fmt: skip
REFERENCE_LEVEL = "a60"  # awareness 0.6, the aware study's default
BLIND_LEVEL = "a0"
SGD_TARGET = 0.2  # the reference arm's predicted contrast over the run (theta), sizing SGD's rate
ADAM_STEP = 0.1  # theta moved by Adam's first step if every weight moved by lr along sign(J)
SNR_BATCHES = 2000  # Monte Carlo batches per arm and level (push_snr)
OPTIMIZERS = ("sgd", "adamw")
FROZEN = "tail_frozen"  # the control arm without a tail gradient (module docstring)
FROZEN_CELL = ("adamw", REFERENCE_LEVEL)  # (optimizer, level) it is trained at


def level_awareness(level: str, estimate_rate: float = 0.5) -> tuple[float, float]:
    """(p, a) of a level: the task's own numbers (data/tasks/aware.Awareness)."""
    from grpo_dial.data.tasks.aware import AwareTask

    compute, estimate = LEVELS[level]
    aw = AwareTask(
        compute_accuracy=compute, estimate_accuracy=estimate, estimate_rate=estimate_rate
    ).awareness()
    return aw.p, aw.awareness


# --------------------------------------------------------------------------- the base policy


def base_responses(
    model, tokenizer, task, problems, samples: int, max_new_tokens: int, temperature: float,
    generator, rng: np.random.Generator,
):  # fmt: skip
    """(rollouts, table): `samples` responses to each problem from the base policy, the task's
    forced cores drawn with `rng`, as a run's responses table at step 0 (first round)."""
    import torch

    from grpo_dial.policy.rollout import forced, generate_groups

    prefixes = forced.draw_prefixes(task, problems, samples, rng)
    with torch.no_grad():
        r = generate_groups(model, tokenizer, problems, samples, max_new_tokens, temperature,
                            generator, prefixes=prefixes)  # fmt: skip
    verdicts = [task.verify(p, t, f) for p, t, f in zip(r.problems, r.texts, r.finished.tolist(),
                                                         strict=True)]  # fmt: skip
    splits = [task.length_split(p, t) for p, t in zip(r.problems, r.texts, strict=True)]
    table = pd.DataFrame(
        {
            "step": 0, "group": r.group_ids.cpu().numpy(),
            "prompt_id": [p.prompt_id for p in r.problems],
            "difficulty": [p.difficulty for p in r.problems],
            "reward": [float(v.correct) for v in verdicts],
            "length": [len(t) for t in r.texts],
            "tokens": r.response_lengths.cpu().numpy(),
            "truncated": [bool(v.truncated) for v in verdicts],
            "work": [s.work for s in splits], "redundant": [s.redundant for s in splits],
            "resample_round": 0, "prefix": list(prefixes or [""] * len(r)),
        }
    )  # fmt: skip
    return r, table


def _forward(model, r):
    """Logits (N, T, V) predicting each response token of rollouts r, with the gradient."""
    import torch

    ids = torch.cat([r.prompt_ids, r.response_ids], 1)  # (N, P + T)
    mask = torch.cat([r.prompt_mask, r.response_mask], 1)
    pos = (mask.cumsum(1) - 1).clamp(min=0)
    logits = model(input_ids=ids, attention_mask=mask, position_ids=pos).logits
    p = r.prompt_ids.shape[1]
    return logits[:, p - 1 : -1]  # (N, T, V): row t predicts response token t


def special_mass(model, tokenizer, r) -> float:
    """Mean over the responses' sampled tokens of the softmax mass on the ids the sampler
    masks (policy/rollout/sample.banned_ids): what its distribution differs from the policy's."""
    import torch

    from grpo_dial.policy.rollout.sample import banned_ids, eos_ids

    banned = banned_ids(tokenizer, eos_ids(model, tokenizer))
    if not banned:
        return 0.0
    with torch.no_grad():
        probs = torch.softmax(_forward(model, r).float(), -1)[..., banned].sum(-1)  # (N, T)
    return float(probs[r.response_mask.bool()].mean())


def _decisions(r) -> np.ndarray:
    """(N, T) bool: the positions where the policy decides to continue the tail or stop (after
    the forced core, up to and including the last generated token)."""
    t = np.arange(r.response_mask.shape[1])[None, :]  # (1, T)
    forced = np.zeros(len(r)) if r.forced is None else r.forced.cpu().numpy()
    return (t >= forced[:, None]) & r.response_mask.cpu().numpy().astype(bool)


def tail_kernel(model, tokenizer, r, rows: int = 512) -> pd.DataFrame:
    """One row: K_ee, K_ec, K_cc, k_diff (module docstring) and each J's L1 norm (an Adam step that
    moves every weight by lr along sign(J) moves the tail logit by lr |J|_1) from the first `rows`
    responses of r, and the decision positions behind each mode's J."""
    import torch

    from grpo_dial.policy.rollout.sample import banned_ids, eos_ids

    r = r.select(torch.arange(min(rows, len(r))))
    eos = eos_ids(model, tokenizer)
    keep = [i for i in range(model.config.vocab_size)
            if i not in set(eos) | set(banned_ids(tokenizer, eos))]  # fmt: skip
    mode = np.array([(p or " ")[0] for p in r.prefixes])  # (N,)
    decide = _decisions(r)  # (N, T)
    params = [p for p in model.parameters() if p.requires_grad]
    grads, counts = {}, {}
    for name, m in (("e", "~"), ("c", "=")):
        sel = torch.tensor(decide & (mode == m)[:, None])  # (N, T)
        counts[name] = int(sel.sum())
        if not counts[name]:
            return pd.DataFrame([dict.fromkeys(("k_ee", "k_ec", "k_cc", "k_diff"), np.nan)])
        logits = _forward(model, r).float()  # (N, T, V)
        cont = torch.logsumexp(logits[..., keep], -1) - torch.logsumexp(logits[..., eos], -1)
        g = torch.autograd.grad(cont[sel].mean(), params)
        grads[name] = torch.cat([x.reshape(-1) for x in g]).double()
    e, c = grads["e"], grads["c"]
    return pd.DataFrame(
        [{"k_ee": float(e @ e), "k_ec": float(e @ c), "k_cc": float(c @ c),
          "k_diff": float((e - c) @ (e - c)), "l1_estimate": float(e.abs().sum()),
          "l1_compute": float(c.abs().sum()), "positions_estimate": counts["e"],
          "positions_compute": counts["c"]}]
    )  # fmt: skip


# --------------------------------------------------------------------------- predictions


def _base_state(base: pd.DataFrame, level: str, options: Mapping) -> pd.DataFrame:
    """The base policy's tails and core at the level's p and a (the task's numbers)."""
    p, a = level_awareness(level, float(options.get("estimate_rate", 0.5)))
    row = base.iloc[0]
    return pd.DataFrame(
        [{"accuracy": p, "awareness": a, "core": row["core"],
          "tail_estimate": row["tail_estimate"], "tail_compute": row["tail_compute"]}]
    )  # fmt: skip


def sgd_prediction(
    dial, base: pd.DataFrame, kernel: pd.DataFrame, level: str, options: Mapping, train: Mapping
) -> dict[str, float]:
    """Per step and unit lr at the base state: dtheta_~, dtheta_= (module docstring)."""
    from grpo_dial.analysis.aware import predicted_step

    state = _base_state(base, level, options)
    uw, uc = predicted_step(state, dial, int(train["group_size"]), int(train["prompts_per_step"]))
    k = kernel.iloc[0]
    return {
        "u_wrong": float(uw[0]), "u_correct": float(uc[0]),
        "step_wrong": float(k["k_ee"] * uw[0] + k["k_ec"] * uc[0]),
        "step_correct": float(k["k_ec"] * uw[0] + k["k_cc"] * uc[0]),
    }  # fmt: skip


def sgd_rate(dial, base: pd.DataFrame, kernel: pd.DataFrame, train: Mapping, options: Mapping
             ) -> pd.DataFrame:  # fmt: skip
    """One row: the SGD learning rate lr = SGD_TARGET / (steps x per-step contrast per unit lr)
    of `dial` at REFERENCE_LEVEL; AdamW's lr_adam = ADAM_STEP / |J|_1 (the mean over modes; the
    first Adam step moves each weight by about lr, so lr |J|_1 bounds the tail logit's first
    move); and the numbers behind them."""
    pred = sgd_prediction(dial, base, kernel, REFERENCE_LEVEL, options, train)
    per_step = pred["step_wrong"] - pred["step_correct"]
    if not per_step > 0:
        raise ValueError(
            f"the reference arm's predicted contrast per step is {per_step:.3g}, not > 0: "
            "choose a reference arm with a push (GRPO)"
        )
    steps = int(train["steps"])
    k = kernel.iloc[0]
    l1 = float((k["l1_estimate"] + k["l1_compute"]) / 2)
    return pd.DataFrame(
        [{"lr": SGD_TARGET / (steps * per_step), "lr_adam": ADAM_STEP / l1,
          "target": SGD_TARGET, "adam_step": ADAM_STEP, "steps": steps,
          "level": REFERENCE_LEVEL, "contrast_per_step": per_step, **pred, **k.to_dict()}]
    )  # fmt: skip


def push_snr(dial, options: Mapping, base: pd.DataFrame, train: Mapping,
             level: str | None = None, batches: int = SNR_BATCHES) -> dict[str, float]:  # fmt: skip
    """aware_sim.push_moments at the base policy's tails and core (forced tokens) for the task's
    accuracies, or a LEVELS level's; the same draws for every arm (seed 0)."""
    from grpo_dial.analysis.aware_sim import push_moments
    from grpo_dial.data.tasks.aware import AwareTask

    task = AwareTask(**options)
    compute, estimate = LEVELS[level] if level else (task.compute_accuracy, task.estimate_accuracy)
    row = base.iloc[0]
    theta = tuple(float(np.log(max(row[f"tail_{m}"], 1e-3))) for m in ("compute", "estimate"))
    return push_moments(
        dial, compute_accuracy=compute, estimate_accuracy=estimate,
        estimate_rate=task.estimate_rate, core=max(int(round(row["core"])) - 1, 1), theta=theta,
        groups=int(train["prompts_per_step"]), group_size=int(train["group_size"]),
        batches=batches, seed=0,
    )  # fmt: skip


# --------------------------------------------------------------------------- training


def train_cell(base_dir: str, task_spec: Mapping, arm, train: Mapping, seeds: Sequence[int],
               pool: int, pool_seed: int, device: str = "cpu", frozen: bool = False
               ) -> pd.DataFrame:  # fmt: skip
    """Every seed of `arm` trained for train['steps'] steps from the base in this process, with
    the trainer's own step (train.loop.run_step; no evaluation, probe or checkpoint): the
    runs' step tables (analysis/aware.step_table) with the step's grad_norm and the seed.
    frozen: the tail-frozen control, every step taken at learning rate 0 (module docstring)."""
    from dataclasses import replace

    from grpo_dial.data.tasks import task_from_spec
    from grpo_dial.policy.model import load_policy
    from grpo_dial.train import loop
    from grpo_dial.train import records as rec
    from grpo_dial.train.config import TrainConfig

    task = task_from_spec(task_spec)
    problems = task.problems("train", pool, pool_seed)
    heldout = task.problems("heldout", 1, pool_seed)
    out = []
    for seed in seeds:
        config = TrainConfig(
            **{**train, "identity_every": 0, "eval_every": 0, "progress": False},
            train_pool=pool,
            pool_seed=pool_seed,
            seed=int(seed),
            device=device,
        )
        config = replace(config, allocation=arm.allocation)
        model, tokenizer = load_policy(base_dir, device=device, dtype="float32")
        run = loop.new_run(model, tokenizer, None, problems, heldout, arm.dial, config, None)
        if frozen:
            for group in run.optimizer.param_groups:
                group["lr"] = 0.0
        for step in range(1, config.steps + 1):
            loop.run_step(run, task, arm.dial, config, step)
        frames = rec.to_frames(run.records, loop.table_columns())
        steps = step_table(frames["responses"]).merge(
            frames["steps"][["step", "grad_norm"]], on="step", how="left"
        )
        out.append(steps.assign(seed=int(seed)))
    return pd.concat(out, ignore_index=True)


# --------------------------------------------------------------------------- tables


def sweep_runs(cells: pd.DataFrame, base: pd.DataFrame, kernel: pd.DataFrame, sgd_lr: float,
               arms: Mapping, train: Mapping, options: Mapping, fraction: float
               ) -> pd.DataFrame:  # fmt: skip
    """One row per (optimizer, level, dial, seed): analysis/aware.run_drift against the base,
    the level's awareness, and the predictions (module docstring); the FROZEN arm (trained with
    `arms[FROZEN]`'s dial at learning rate 0) is predicted 0 with a push SNR of 0."""
    from grpo_dial.core.dial import arm_from_fields

    rows, pushes = [], {}
    steps_n = int(train["steps"])
    t_e, t_c = float(base["tail_estimate"].iloc[0]), float(base["tail_compute"].iloc[0])
    for (opt, level, d, seed), s in cells.groupby(["optimizer", "level", "dial", "seed"]):
        dial = arm_from_fields(arms[d]).dial
        lr = 0.0 if d == FROZEN else sgd_lr if opt == "sgd" else float(train["lr"])
        steps = s.sort_values("step")[list(STEP_COLUMNS)]
        drift = run_drift(steps, s[["grad_norm"]], dial, int(train["group_size"]),
                          int(train["prompts_per_step"]), lr, train.get("grad_clip"), fraction,
                          base)  # fmt: skip
        if (level, d) not in pushes:
            sgd = sgd_prediction(dial, base, kernel, level, options, train)
            snr = push_snr(dial, options, base, train, level)
            if d == FROZEN:
                snr = dict.fromkeys(snr, 0.0)
            pushes[(level, d)] = (sgd, snr)
        sgd, snr = pushes[(level, d)]
        we, wc = sgd["step_wrong"] * lr * steps_n, sgd["step_correct"] * lr * steps_n
        adam = {m: steps_n * lr * snr[f"snr_{m}"] / np.sqrt(1 + snr[f"snr_{m}"] ** 2)
                for m in ("wrong", "correct")}  # fmt: skip
        # the SGD closed form through the kernel (theta, then L and tokens); under Adam one
        # coordinate's drift (each NaN under the other optimizer) and the push's SNR
        sg = 1.0 if opt == "sgd" else np.nan
        ad = 1.0 if opt != "sgd" else np.nan
        rows.append(
            {"optimizer": opt, "level": level, "a": level_awareness(level)[1], "dial": d,
             "seed": int(seed), "lr": lr, **drift,
             "pred_theta_wrong": sg * we, "pred_theta_correct": sg * wc,
             "pred_contrast": sg * (t_e / (1 + t_e) * we - t_c / (1 + t_c) * wc),
             "pred_d_wrong": sg * t_e / (1 + t_e) * we,
             "pred_contrast_tokens": sg * (t_e * we - t_c * wc),
             "pred_d_wrong_tokens": sg * t_e * we,
             "pred_d_correct_tokens": sg * t_c * wc,
             "snr_contrast": snr["snr_contrast"], "snr_wrong": snr["snr_wrong"],
             "snr_correct": snr["snr_correct"],
             "adam_contrast": ad * (t_e / (1 + t_e) * adam["wrong"]
                                    - t_c / (1 + t_c) * adam["correct"]),
             "adam_d_wrong": ad * t_e / (1 + t_e) * adam["wrong"],
             "adam_contrast_tokens": ad * (t_e * adam["wrong"] - t_c * adam["correct"]),
             "adam_d_wrong_tokens": ad * t_e * adam["wrong"],
             "adam_d_correct_tokens": ad * t_c * adam["correct"]}
        )  # fmt: skip
    return pd.DataFrame(rows)


DOSE_QUANTITIES = (
    "contrast_tokens", "d_wrong_tokens", "d_correct_tokens", "contrast", "d_wrong", "d_common",
)  # fmt: skip
DOSE_COLUMNS = (
    "optimizer level a dial quantity n_seeds mean lo hi min max n_pos n_neg sign_p wilcoxon_p "
    "n_up n_down takeoff_p predicted adam_tabular snr awareness_measured truncation_last"
).split()


def _snr_column(quantity: str) -> str:
    """The push SNR column that predicts `quantity` under Adam."""
    return next((f"snr_{m}" for m in ("wrong", "correct") if f"d_{m}" in quantity),
                "snr_contrast")  # fmt: skip


def dose_table(runs: pd.DataFrame, level: float = 0.9) -> pd.DataFrame:
    """DOSE_COLUMNS per optimizer, level, dial and quantity (module docstring). predicted: the
    SGD closed form through the kernel at the run's learning rate (NaN for d_common, whose
    first-order prediction is only the kernel's asymmetry); adam_tabular: one Adam coordinate's
    drift; snr: of the contrast push (of the wrong-mode push for d_wrong*)."""
    rows = []
    for (opt, lev, d), g in runs.groupby(["optimizer", "level", "dial"], sort=False):
        blind = runs[(runs["optimizer"] == opt) & (runs["level"] == BLIND_LEVEL)
                     & (runs["dial"] == d)]  # fmt: skip
        up, down = int((g["takeoff"] > 0).sum()), int((g["takeoff"] < 0).sum())
        takeoff_p = (
            fisher_p(up, len(g), int((blind["takeoff"] > 0).sum()), len(blind))
            if lev != BLIND_LEVEL and len(blind) else float("nan")
        )  # fmt: skip
        for q in DOSE_QUANTITIES:
            x = g[q].to_numpy(dtype=float)
            s = t_interval(x, level)
            pred = f"pred_{q}" if f"pred_{q}" in g else None
            adam = f"adam_{q}" if f"adam_{q}" in g else None
            rows.append(
                {"optimizer": opt, "level": lev, "a": float(g["a"].iloc[0]), "dial": d,
                 "quantity": q, "n_seeds": len(g), "mean": s.mean, "lo": s.lo, "hi": s.hi,
                 "min": s.low, "max": s.high, **rank_tests(x), "n_up": up, "n_down": down,
                 "takeoff_p": takeoff_p,
                 "predicted": float(g[pred].mean()) if pred else float("nan"),
                 "adam_tabular": float(g[adam].mean()) if adam else float("nan"),
                 "snr": float(g[_snr_column(q)].mean()) if _snr_column(q) in g else np.nan,
                 "awareness_measured": float(g["awareness"].mean()),
                 "truncation_last": float(g["truncation_last"].max())}
            )  # fmt: skip
    return pd.DataFrame(rows, columns=DOSE_COLUMNS)


FIT_COLUMNS = ("optimizer", "quantity", "predictor", "slope", "r2", "spearman", "spearman_p", "n")


def dose_fit(dose: pd.DataFrame) -> pd.DataFrame:
    """Per optimizer and quantity, over every (level, arm) cell: the least-squares slope of the
    measured mean on the prediction through the origin, its R^2 and Spearman's rank correlation.
    The predictor is the SGD closed form under SGD and the SNR under Adam."""
    rows = []
    for (opt, q), g in dose.groupby(["optimizer", "quantity"], sort=False):
        predictor = "predicted" if opt == "sgd" else "snr"
        ok = g[[predictor, "mean"]].dropna()
        if len(ok) < 3:
            continue
        x, y = ok[predictor].to_numpy(dtype=float), ok["mean"].to_numpy(dtype=float)
        slope = float(x @ y / (x @ x)) if x @ x > 0 else float("nan")
        if np.ptp(x) == 0 or np.ptp(y) == 0:
            continue
        rho = stats.spearmanr(x, y)
        rows.append(
            {"optimizer": opt, "quantity": q, "predictor": predictor, "slope": slope,
             "r2": r_squared(y, slope * x), "spearman": float(rho.statistic),
             "spearman_p": float(rho.pvalue), "n": len(ok)}
        )  # fmt: skip
    return pd.DataFrame(rows, columns=list(FIT_COLUMNS))


def _p(x) -> str:
    return "n/a" if pd.isna(x) else f"{x:.2g}"


def _cell(r) -> str:
    """One quantity over seeds: mean [90 %], or the seeds' range below 3 seeds."""
    from grpo_dial.analysis.summary_format import over_seeds, signed

    return over_seeds(r["mean"], r["lo"], r["hi"], r["n_seeds"], r["min"], r["max"], signed,
                      digits=2)  # fmt: skip


def _predicted(row, optimizer: str) -> str:
    """The prediction beside a measured cell: the SGD closed form, or Adam's SNR (and drift)."""
    if optimizer == "sgd":
        return f"{row['predicted']:+.2f}"
    return f"{row['snr']:.2f} ({row['adam_tabular']:+.2f})"


def dose_markdown(dose: pd.DataFrame, fit: pd.DataFrame, source: str = "") -> str:
    """aware_sweep/summary.md: per optimizer, a table of each level and arm's measured contrast
    and wrong-mode drift in tokens (90 % over seeds, sign and Wilcoxon p) beside the prediction
    (the SGD closed form through the kernel, in tokens; under Adam the push's SNR and one Adam
    coordinate's drift), the common drift d_common in log(1 + T) and the last window's largest
    truncated share; then the fit of measured on predicted. Every number from `dose` and `fit`."""
    lines = ["# The aware tail's dose-response", ""]
    if source:
        lines += [f"From {source}.", ""]
    by = dose.set_index(["optimizer", "level", "dial", "quantity"])
    for opt, g in dose.groupby("optimizer", sort=False):
        pred = "SGD closed form" if opt == "sgd" else "SNR (one Adam coordinate)"
        lines += [
            f"## {opt}", "",
            f"| a | arm | seeds | contrast, tokens | sign / Wilcoxon p | {pred} | "
            f"wrong-mode drift, tokens | sign / Wilcoxon p | {pred} | right-mode drift, tokens "
            "| common drift, log(1 + T) | truncated, last window (max) |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|",
        ]  # fmt: skip
        for (lev, d), _ in g.groupby(["level", "dial"], sort=False):
            c, w = by.loc[(opt, lev, d, "contrast_tokens")], by.loc[(opt, lev, d, "d_wrong_tokens")]
            r, m = by.loc[(opt, lev, d, "d_correct_tokens")], by.loc[(opt, lev, d, "d_common")]

            lines.append(
                f"| {c['a']:.1f} | {d} | {int(c['n_seeds'])} | {_cell(c)} | {_p(c['sign_p'])} / "
                f"{_p(c['wilcoxon_p'])} | {_predicted(c, opt)} | {_cell(w)} | {_p(w['sign_p'])} / "
                f"{_p(w['wilcoxon_p'])} | {_predicted(w, opt)} | {_cell(r)} | {_cell(m)} | "
                f"{100 * c['truncation_last']:.1f} % |"
            )
        lines.append("")
    if len(fit):
        lines += ["## Measured on predicted, over levels and arms", "",
                  "| optimizer | quantity | predictor | slope | R^2 | Spearman (p) | cells |",
                  "|---|---|---|---|---|---|---|"]  # fmt: skip
        for _, f in fit.iterrows():
            lines.append(
                f"| {f['optimizer']} | {f['quantity']} | {f['predictor']} | {f['slope']:.3g} | "
                f"{f['r2']:.2f} | {f['spearman']:+.2f} ({_p(f['spearman_p'])}) | {int(f['n'])} |"
            )
    return "\n".join(lines).rstrip() + "\n"


__all__ = [
    "BLIND_LEVEL", "FROZEN", "FROZEN_CELL", "LEVELS", "REFERENCE_LEVEL", "SGD_TARGET",
    "base_responses", "dose_fit", "dose_markdown", "dose_table", "level_awareness", "push_snr",
    "sgd_prediction", "sgd_rate", "special_mass", "sweep_runs", "tail_kernel", "train_cell",
]  # fmt: skip

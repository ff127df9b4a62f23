# The aware-tail study (docs/length-bias.md#the-aware-tail): with task `aware`, the base
# policy sampled at step 0 and every run's tail by mode against the closed form (analysis/aware/runs.py),
# reusing channel (the base sample's prompts, samples and seed; the reference arm) and
# decompose.window_fraction. The dose-response sweep (analysis/aware/dose.py) is its own target,
# aware_dose_figure: every arm of the config at each awareness level of aware_sweep.levels (all of
# LEVELS by default), with each optimizer
# of aware_sweep.optimizers (SGD and AdamW), in
# one process per (optimizer, level, arm) (config/length_aware_sweep*.yaml), and the one-step
# probe at the base policy (aware_probe, read by aware_dose) and at the SGD runs' later states
# (aware_later.smk).
from grpo_dial.analysis.aware.grid import LEVELS as AWARE_LEVELS  # noqa: E402 (imports nothing)
from grpo_dial.analysis.aware.grid import FROZEN as AWARE_FROZEN  # noqa: E402
from grpo_dial.analysis.aware.grid import FROZEN_CELL as AWARE_FROZEN_CELL  # noqa: E402

AWARE_OPTIMIZERS = config["aware_sweep"]["optimizers"]  # sgd and adamw by default
AWARE_SWEEP_LEVELS = config["aware_sweep"]["levels"]  # every level of LEVELS by default
AWARE_ENABLED = PLAN.aware_enabled
AWARE_BRIDGE = PLAN.aware_bridge  # math_cot's 8 samples of one model per prompt beside it
AWARE_TARGETS = ([f"{RESULTS}/figures/aware.png"] if AWARE_ENABLED else []) + (
    [f"{RESULTS}/aware/bridge.csv"] if AWARE_BRIDGE else []
)  # read by all_targets (common.smk)
AWARE_LATER_ARMS = PLAN.aware_later  # the arms aware_later_probe replays ([]: off)
AWARE_LATER = f"{RESULTS}/aware_sweep/later_probe.csv"  # read by aware_dose
AWARE_NULL = "dr_grpo"  # the zero-push arm take-off counts are tested against (when configured)


wildcard_constraints:
    optimizer="|".join(AWARE_OPTIMIZERS),
    level="|".join(AWARE_LEVELS),


rule aware_base:
    """The base policy at step 0, before any update: its responses, tails by mode and kernel."""
    input:
        model=BASE_MODEL,
    output:
        responses=f"{RESULTS}/aware/base_responses.parquet",
        base=f"{RESULTS}/aware/base.csv",
        kernel=f"{RESULTS}/aware/kernel.csv",
    log:
        f"{RESULTS}/logs/aware/aware_base.log",
    benchmark:
        f"{RESULTS}/benchmarks/aware/aware_base.tsv"
    threads: config["train"]["threads"]
    resources:
        gpu=GPU,  # one GPU job at a time per GPU (0 on CPU)
    params:
        code=fingerprint("aware_base"),  # the source it runs: an edit reruns it
        **CHANNEL_PARAMS,
        model=config["model"]["base"],
        sgd_weights=config["aware_sweep"]["sgd_weights"],
        kernel_rows=config["aware_sweep"]["kernel_rows"],
    conda:
        "../../envs/grpo-dial.yaml"
    script:
        "../scripts/stage.py"


rule aware_summary:
    """Per step, run and dial: the tail by mode and correctness against the closed form, rank
    tests over seeds, the truncated share per window."""
    input:
        responses=run_files("responses.parquet"),
        steps=run_files("steps.parquet"),
        base=f"{RESULTS}/aware/base.csv",
        base_responses=f"{RESULTS}/aware/base_responses.parquet",
    output:
        steps=f"{RESULTS}/aware/steps.parquet",
        runs=f"{RESULTS}/aware/runs.csv",
        truncation=f"{RESULTS}/aware/truncation.csv",
        decomposition=f"{RESULTS}/aware/decomposition.csv",
        drift=report(
            f"{RESULTS}/aware/drift.csv", caption="../report/aware_drift_table.rst",
            category="Length by correctness",
        ),
    log:
        f"{RESULTS}/logs/aware/aware_summary.log",
    benchmark:
        f"{RESULTS}/benchmarks/aware/aware_summary.tsv"
    params:
        code=fingerprint("aware_summary"),  # the source it runs: an edit reruns it
        runs=RUNS,
        arms=ARM_FIELDS,
        train=config["train"],
        window_fraction=config["decompose"]["window_fraction"],
        reference=config["channel"]["reference"],
        null=AWARE_NULL,
        task=TASK,
    conda:
        "../../envs/grpo-dial.yaml"
    script:
        "../scripts/stage.py"


rule aware_figure:
    """The tail by mode over training, each dial's drift and its ratio to GRPO's, predicted."""
    input:
        steps=f"{RESULTS}/aware/steps.parquet",
        drift=f"{RESULTS}/aware/drift.csv",
        runs=f"{RESULTS}/aware/runs.csv",
        base=f"{RESULTS}/aware/base.csv",
        decomposition=f"{RESULTS}/aware/decomposition.csv",
    output:
        png=report(
            f"{RESULTS}/figures/aware.png", caption="../report/aware.rst",
            category="Length by correctness",
        ),
        pdf=f"{RESULTS}/figures/aware.pdf",
        decomposition_png=report(
            f"{RESULTS}/figures/aware_decomposition.png", caption="../report/aware.rst",
            category="Length by correctness",
        ),
    log:
        f"{RESULTS}/logs/figures/aware_figure.log",
    benchmark:
        f"{RESULTS}/benchmarks/figures/aware_figure.tsv"
    params:
        code=fingerprint("aware_figure"),  # the source it runs: an edit reruns it
        reference=config["channel"]["reference"],
    conda:
        "../../envs/grpo-dial.yaml"
    script:
        "../scripts/stage.py"



rule aware_bridge:
    """The push GRPO's 1/|o| would put on real samples' lengths (math_cot_100, GSM8K), with
    intervals and the informative problems behind them."""
    input:
        responses=f"{RESULTS}/real_lengths/responses.parquet",
    output:
        bridge=f"{RESULTS}/aware/bridge.csv",
    log:
        f"{RESULTS}/logs/aware/aware_bridge.log",
    benchmark:
        f"{RESULTS}/benchmarks/aware/aware_bridge.tsv"
    params:
        code=fingerprint("aware_bridge"),  # the source it runs: an edit reruns it
        n_boot=config["real_lengths"]["n_boot"],
        seed=config["real_lengths"]["seed"],
    conda:
        "../../envs/grpo-dial.yaml"
    script:
        "../scripts/stage.py"


rule aware_rates:
    """The sweep's learning rates, sized from the base's tail kernel: SGD's from the closed form,
    AdamW's from the kernel's L1 norm."""
    input:
        base=f"{RESULTS}/aware/base.csv",
        kernel=f"{RESULTS}/aware/kernel.csv",
    output:
        rate=f"{RESULTS}/aware_sweep/rates.csv",
    log:
        f"{RESULTS}/logs/aware_sweep/rates.log",
    params:
        code=fingerprint("aware_rates"),  # the source it runs: an edit reruns it
        arm=ARM_FIELDS.get(config["channel"]["reference"]),  # the rates are the reference's alone
        train=config["train"],
        task=TASK,
        sgd_weights=config["aware_sweep"]["sgd_weights"],
    conda:
        "../../envs/grpo-dial.yaml"
    script:
        "../scripts/stage.py"


AWARE_CELL_INPUTS = {  # a sweep cell's inputs: the task's files, the base policy, the rates
    **TASK_INPUTS,
    **({"model": BASE_MODEL} if BASE_MODEL else {}),
    "rate": f"{RESULTS}/aware_sweep/rates.csv",
}


rule aware_sweep_cell:
    """Every seed of one arm at one awareness level with one optimizer, trained in one process."""
    input:
        **AWARE_CELL_INPUTS,
    output:
        steps=f"{RESULTS}/aware_sweep/{{optimizer}}/{{level}}/{{dial}}.parquet",
    log:
        f"{RESULTS}/logs/aware_sweep/{{optimizer}}/{{level}}/{{dial}}.log",
    benchmark:
        f"{RESULTS}/benchmarks/aware_sweep/{{optimizer}}/{{level}}/{{dial}}.tsv"
    threads: config["train"]["threads"]
    resources:
        gpu=GPU,  # one GPU job at a time per GPU (0 on CPU)
    params:
        code=fingerprint("aware_sweep_cell"),  # the source it runs: an edit reruns it
        task=TASK,
        model=config["model"]["base"],
        device=config["model"]["device"],
        arm=lambda wildcards: ARM_FIELDS[wildcards.dial],
        dial=lambda wildcards: wildcards.dial,
        level=lambda wildcards: wildcards.level,
        optimizer=lambda wildcards: wildcards.optimizer,
        train=train_params,
        seeds=config["train"]["seeds"],
        pool=config["pass_rates"]["pool"],
        pool_seed=config["pass_rates"]["seed"],
        threads=config["train"]["threads"],
    conda:
        "../../envs/grpo-dial.yaml"
    script:
        "../scripts/stage.py"


AWARE_FROZEN_STEPS = (
    f"{RESULTS}/aware_sweep/{AWARE_FROZEN_CELL[0]}/{AWARE_FROZEN_CELL[1]}/{AWARE_FROZEN}.parquet"
)


rule aware_frozen_cell:
    """The tail-frozen control: the reference arm's sampling with zero loss weight on the tail
    (no token keeps a weight, so learning rate 0), every seed in one process."""
    input:
        **AWARE_CELL_INPUTS,
    output:
        steps=AWARE_FROZEN_STEPS,
    log:
        f"{RESULTS}/logs/aware_sweep/{AWARE_FROZEN}.log",
    benchmark:
        f"{RESULTS}/benchmarks/aware_sweep/{AWARE_FROZEN}.tsv"
    threads: config["train"]["threads"]
    resources:
        gpu=GPU,  # one GPU job at a time per GPU (0 on CPU)
    params:
        code=fingerprint("aware_frozen_cell"),  # the source it runs: an edit reruns it
        task=TASK,
        model=config["model"]["base"],
        device=config["model"]["device"],
        arm=ARM_FIELDS.get(config["channel"]["reference"]),
        dial=AWARE_FROZEN,
        level=AWARE_FROZEN_CELL[1],
        optimizer=AWARE_FROZEN_CELL[0],
        frozen=True,
        train=train_params,
        seeds=config["train"]["seeds"],
        pool=config["pass_rates"]["pool"],
        pool_seed=config["pass_rates"]["seed"],
        threads=config["train"]["threads"],
    conda:
        "../../envs/grpo-dial.yaml"
    script:
        "../scripts/stage.py"


rule aware_probe:
    """Every arm's expected one-step SGD move of each mode's tail at the base policy, measured
    through the transformer at every level, beside the closed form through the kernel."""
    input:
        **({"model": BASE_MODEL} if BASE_MODEL else {}),
        **TASK_INPUTS,
        base=f"{RESULTS}/aware/base.csv",
        kernel=f"{RESULTS}/aware/kernel.csv",
    output:
        probe=f"{RESULTS}/aware_sweep/probe.csv",
        fit=f"{RESULTS}/aware_sweep/probe_fit.csv",
        batches=f"{RESULTS}/aware_sweep/probe_batches.csv",
    log:
        f"{RESULTS}/logs/aware_sweep/aware_probe.log",
    benchmark:
        f"{RESULTS}/benchmarks/aware_sweep/aware_probe.tsv"
    threads: config["train"]["threads"]
    resources:
        gpu=GPU,  # one GPU job at a time per GPU (0 on CPU)
    params:
        code=fingerprint("aware_probe"),  # the source it runs: an edit reruns it
        **CHANNEL_PARAMS,
        model=config["model"]["base"],
        arms=ARM_FIELDS,
        reference=config["channel"]["reference"],
        train=train_params,
        seed=config["train"]["seeds"][0],
        batches=config["aware_sweep"]["probe_batches"],
        sgd_weights=config["aware_sweep"]["sgd_weights"],
        kernel_rows=config["aware_sweep"]["kernel_rows"],
        levels=AWARE_SWEEP_LEVELS,
    conda:
        "../../envs/grpo-dial.yaml"
    script:
        "../scripts/stage.py"


rule aware_dose:
    """Per seed, and per optimizer, level and arm: measured drift beside the predictions; arms
    paired by seed and their ratios to the reference with bootstrap intervals; the wrong mode's
    stall read against the tail's shape and end state."""
    input:
        cells=expand(
            f"{RESULTS}/aware_sweep/{{optimizer}}/{{level}}/{{dial}}.parquet",
            optimizer=AWARE_OPTIMIZERS, level=AWARE_SWEEP_LEVELS, dial=list(ARM_FIELDS),
        ),
        frozen=AWARE_FROZEN_STEPS,
        base=f"{RESULTS}/aware/base.csv",
        responses=f"{RESULTS}/aware/base_responses.parquet",
        kernel=f"{RESULTS}/aware/kernel.csv",
        rate=f"{RESULTS}/aware_sweep/rates.csv",
        probe=f"{RESULTS}/aware_sweep/probe.csv",
        probe_fit=f"{RESULTS}/aware_sweep/probe_fit.csv",
        probe_batches=f"{RESULTS}/aware_sweep/probe_batches.csv",
        **({"later": AWARE_LATER} if AWARE_LATER_ARMS else {}),
    output:
        runs=f"{RESULTS}/aware_sweep/runs.csv",
        truncation=f"{RESULTS}/aware_sweep/truncation.csv",
        fit=f"{RESULTS}/aware_sweep/fit.csv",
        paired=f"{RESULTS}/aware_sweep/paired.csv",
        ratios=f"{RESULTS}/aware_sweep/ratios.csv",
        tail_shape=f"{RESULTS}/aware_sweep/tail_shape.csv",
        summary=f"{RESULTS}/aware_sweep/summary.md",
        dose=report(
            f"{RESULTS}/aware_sweep/dose.csv", caption="../report/aware_dose_table.rst",
            category="Length by correctness",
        ),
    log:
        f"{RESULTS}/logs/aware_sweep/aware_dose.log",
    benchmark:
        f"{RESULTS}/benchmarks/aware_sweep/aware_dose.tsv"
    params:
        code=fingerprint("aware_dose"),  # the source it runs: an edit reruns it
        arms=ARM_FIELDS,
        reference=config["channel"]["reference"],
        train=config["train"],
        task=TASK,
        window_fraction=config["decompose"]["window_fraction"],
    conda:
        "../../envs/grpo-dial.yaml"
    script:
        "../scripts/stage.py"


rule aware_dose_figure:
    """Measured against predicted contrast and wrong-mode drift, per level, arm and optimizer."""
    input:
        dose=f"{RESULTS}/aware_sweep/dose.csv",
        fit=f"{RESULTS}/aware_sweep/fit.csv",
    output:
        png=report(
            f"{RESULTS}/figures/aware_dose.png", caption="../report/aware_dose.rst",
            category="Length by correctness",
        ),
        pdf=f"{RESULTS}/figures/aware_dose.pdf",
    log:
        f"{RESULTS}/logs/figures/aware_dose_figure.log",
    params:
        code=fingerprint("aware_dose_figure"),  # the source it runs: an edit reruns it
    conda:
        "../../envs/grpo-dial.yaml"
    script:
        "../scripts/stage.py"

# The aware-tail study (issue 27, docs/length-bias.md#the-aware-tail): with task `aware`, every
# run's tail by mode against the closed form (analysis/aware.py), reusing channel.reference and
# decompose.window_fraction.
AWARE_ENABLED = PLAN.aware_enabled
AWARE_BRIDGE = PLAN.aware_bridge  # math_cot's 8 samples of one model per prompt beside it
AWARE_TARGETS = ([f"{RESULTS}/figures/aware.png"] if AWARE_ENABLED else []) + (
    [f"{RESULTS}/aware/bridge.csv"] if AWARE_BRIDGE else []
)  # read by all_targets (common.smk)


rule aware_summary:
    """Per step, run and dial: the tail by mode and correctness against the closed form."""
    input:
        responses=run_files("responses.parquet"),
        steps=run_files("steps.parquet"),
    output:
        steps=f"{RESULTS}/aware/steps.parquet",
        runs=f"{RESULTS}/aware/runs.csv",
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
        runs=RUNS,
        arms=ARM_FIELDS,
        train=config["train"],
        window_fraction=config["decompose"]["window_fraction"],
        reference=config["channel"]["reference"],
    conda:
        "../../envs/grpo-dial.yaml"
    script:
        "../scripts/stage.py"


rule aware_figure:
    """The tail by mode over training, each dial's drift and its ratio to GRPO's, predicted."""
    input:
        steps=f"{RESULTS}/aware/steps.parquet",
        drift=f"{RESULTS}/aware/drift.csv",
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
        reference=config["channel"]["reference"],
    conda:
        "../../envs/grpo-dial.yaml"
    script:
        "../scripts/stage.py"



rule aware_bridge:
    """The push GRPO's 1/|o| would put on a real model's lengths (math_cot_100), with intervals."""
    input:
        responses=f"{RESULTS}/real_lengths/responses.parquet",
    output:
        bridge=f"{RESULTS}/aware/bridge.csv",
    log:
        f"{RESULTS}/logs/aware/aware_bridge.log",
    benchmark:
        f"{RESULTS}/benchmarks/aware/aware_bridge.tsv"
    params:
        n_boot=config["real_lengths"]["n_boot"],
        seed=config["real_lengths"]["seed"],
    conda:
        "../../envs/grpo-dial.yaml"
    script:
        "../scripts/stage.py"

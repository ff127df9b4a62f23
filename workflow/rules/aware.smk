# The aware-tail study (issue 27, docs/length-bias.md#the-aware-tail): with task `aware`, every
# run's tail by mode against the closed form (analysis/aware.py), reusing channel.reference and
# decompose.window_fraction.
AWARE_ENABLED = POLICY_ENABLED and config["task"]["name"] == "aware"


def aware_targets():
    return [f"{RESULTS}/figures/aware.png"] if AWARE_ENABLED else []


rule aware_summary:
    """Per step, run and dial: the tail by mode and correctness against the closed form."""
    input:
        responses=run_files("responses.parquet"),
        steps=run_files("steps.parquet"),
    output:
        steps=f"{RESULTS}/aware/steps.parquet",
        runs=f"{RESULTS}/aware/runs.csv",
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
        dials=config["dials"],
        train=config["train"],
        window_fraction=config["decompose"]["window_fraction"],
        reference=config["channel"]["reference"],
    conda:
        "../../envs/grpo-dial.yaml"
    script:
        "../scripts/aware_summary.py"


rule aware_figure:
    """The tail by mode over training, each dial's drift and its ratio to GRPO's, predicted."""
    input:
        steps=f"{RESULTS}/aware/steps.parquet",
        drift=f"{RESULTS}/aware/drift.csv",
    output:
        png=report(
            f"{RESULTS}/figures/aware.png", caption="../report/aware.rst",
            category="Length by correctness",
        ),
        pdf=f"{RESULTS}/figures/aware.pdf",
    log:
        f"{RESULTS}/logs/figures/aware_figure.log",
    benchmark:
        f"{RESULTS}/benchmarks/figures/aware_figure.tsv"
    params:
        reference=config["channel"]["reference"],
    conda:
        "../../envs/grpo-dial.yaml"
    script:
        "../scripts/aware_figure.py"

# The one-step probe at the SGD runs' later states (docs/length-bias.md, "Why the wrong mode
# stalls"): the runs of aware_sweep.later_probe's arms and seeds in every level's SGD cell,
# replayed to its steps (no checkpoint stored); read by aware_dose.


rule aware_later_probe:
    """Each mode's expected one-step SGD move at the runs' later states, through the transformer
    and through the kernel of each state's own sample, beside the moves the runs then made."""
    input:
        **AWARE_CELL_INPUTS,
        base=f"{RESULTS}/aware/base.csv",
        kernel=f"{RESULTS}/aware/kernel.csv",
        cells=expand(
            f"{RESULTS}/aware_sweep/sgd/{{level}}/{{dial}}.parquet",
            level=AWARE_SWEEP_LEVELS, dial=AWARE_LATER_ARMS,
        ),
    output:
        later=AWARE_LATER,
    log:
        f"{RESULTS}/logs/aware_sweep/aware_later_probe.log",
    benchmark:
        f"{RESULTS}/benchmarks/aware_sweep/aware_later_probe.tsv"
    threads: config["train"]["threads"]
    params:
        code=fingerprint("aware_later_probe"),  # the source it runs: an edit reruns it
        **CHANNEL_PARAMS,
        model=config["model"]["base"],
        arms={d: ARM_FIELDS[d] for d in AWARE_LATER_ARMS},
        train=train_params,
        later=config["aware_sweep"]["later_probe"],
        levels=AWARE_SWEEP_LEVELS,
        window_fraction=config["decompose"]["window_fraction"],
        kernel_rows=config["aware_sweep"].get("kernel_rows", 512),  # aware_base's J rows
    conda:
        "../../envs/grpo-dial.yaml"
    script:
        "../scripts/stage.py"

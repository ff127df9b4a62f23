rule allocation_comparison:
    """Adaptive against uniform group sizes at equal samples per step, with intervals over seeds."""
    input:
        steps=allocation_files("steps.parquet"),
        evals=allocation_files("evals.parquet"),
        allocation=allocation_files("allocation.parquet"),
        responses=allocation_files("responses.parquet"),
    output:
        curves=f"{RESULTS}/allocation/curves.parquet",
        comparison=report(
            f"{RESULTS}/allocation/comparison.csv", caption="../report/allocation_comparison.rst",
            category="Adaptive group size",
        ),
        by_band=report(
            f"{RESULTS}/allocation/by_band.csv", caption="../report/allocation_by_band.rst",
            category="Adaptive group size",
        ),
    log:
        f"{RESULTS}/logs/allocation/comparison.log",
    benchmark:
        f"{RESULTS}/benchmarks/allocation/comparison.tsv"
    params:
        code=fingerprint("allocation_comparison"),  # the source it runs: an edit reruns it
        runs=ALLOCATION_RUNS,
        pairs=ALLOCATION_PAIRS,
        target=config["allocation_compare"]["target"],
    conda:
        "../../envs/grpo-dial.yaml"
    script:
        "../scripts/stage.py"


rule allocation_figure:
    """Accuracy against samples spent, and mean G by pass-rate band, adaptive against uniform."""
    input:
        curves=f"{RESULTS}/allocation/curves.parquet",
        by_band=f"{RESULTS}/allocation/by_band.csv",
    output:
        figure_png=report(
            f"{RESULTS}/figures/allocation.png", caption="../report/allocation.rst",
            category="Adaptive group size",
        ),
        figure_pdf=f"{RESULTS}/figures/allocation.pdf",
    log:
        f"{RESULTS}/logs/figures/allocation.log",
    benchmark:
        f"{RESULTS}/benchmarks/figures/allocation.tsv"
    params:
        code=fingerprint("allocation_figure"),  # the source it runs: an edit reruns it
        pairs=ALLOCATION_PAIRS,
    conda:
        "../../envs/grpo-dial.yaml"
    script:
        "../scripts/stage.py"

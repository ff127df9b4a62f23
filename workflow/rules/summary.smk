rule summary:
    """results/summary.md: the run's key numbers in sentences, generated from the tables."""
    input:
        unpack(summary_inputs),
    output:
        summary=report(f"{RESULTS}/summary.md", caption="../report/summary.rst", category="Summary"),
    log:
        f"{RESULTS}/logs/summary.log",
    benchmark:
        f"{RESULTS}/benchmarks/summary.tsv"
    conda:
        "../../envs/grpo-dial.yaml"
    script:
        "../scripts/stage.py"

rule summary:
    """results/summary.md: the run's key numbers in sentences, generated from the tables, under
    the run's provenance; results/manifest.json: that provenance in full."""
    input:
        unpack(summary_inputs),
    output:
        summary=report(f"{RESULTS}/summary.md", caption="../report/summary.rst", category="Summary"),
        manifest=report(
            f"{RESULTS}/manifest.json", caption="../report/manifest.rst", category="Summary"
        ),
    params:
        code=fingerprint("summary"),  # the source it runs: an edit reruns it
        provenance=PROVENANCE,
    log:
        f"{RESULTS}/logs/summary.log",
    benchmark:
        f"{RESULTS}/benchmarks/summary.tsv"
    conda:
        "../../envs/grpo-dial.yaml"
    script:
        "../scripts/stage.py"

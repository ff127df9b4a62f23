rule real_lengths:
    """Length of correct against incorrect responses in logged real model outputs."""
    input:
        **REAL_LENGTH_INPUTS,
    output:
        responses=f"{RESULTS}/real_lengths/responses.parquet",
        by_correctness=report(
            f"{RESULTS}/real_lengths/by_correctness.csv", caption="../report/real_lengths_table.rst",
            category="Real responses",
        ),
    log:
        f"{RESULTS}/logs/real_lengths/real_lengths.log",
    benchmark:
        f"{RESULTS}/benchmarks/real_lengths/real_lengths.tsv"
    params:
        code=fingerprint("real_lengths"),  # the source it runs: an edit reruns it
        tokenizer=config["real_lengths"]["tokenizer"],
        n_boot=config["real_lengths"]["n_boot"],
        seed=config["real_lengths"]["seed"],
    conda:
        "../../envs/grpo-dial.yaml"
    script:
        "../scripts/stage.py"


rule real_lengths_figure:
    """Correct against incorrect response length by difficulty, per source."""
    input:
        by_correctness=f"{RESULTS}/real_lengths/by_correctness.csv",
    output:
        figure_png=report(
            f"{RESULTS}/figures/real_lengths.png", caption="../report/real_lengths.rst",
            category="Real responses",
        ),
        figure_pdf=f"{RESULTS}/figures/real_lengths.pdf",
    log:
        f"{RESULTS}/logs/figures/real_lengths.log",
    benchmark:
        f"{RESULTS}/benchmarks/figures/real_lengths.tsv"
    params:
        code=fingerprint("real_lengths_figure"),  # the source it runs: an edit reruns it
    conda:
        "../../envs/grpo-dial.yaml"
    script:
        "../scripts/stage.py"

rule import_run:
    """Rollouts logged by TRL, verl or any trainer, in the per-response schema."""
    output:
        responses=f"{RESULTS}/external/{{run}}/responses.parquet",
    log:
        f"{RESULTS}/logs/external/{{run}}/import.log",
    benchmark:
        f"{RESULTS}/benchmarks/external/{{run}}/import.tsv"
    params:
        code=fingerprint("import_run"),  # the source it runs: an edit reruns it
        spec=run_spec,
    conda:
        "../../envs/grpo-dial.yaml"
    script:
        "../scripts/stage.py"


rule diagnose_run:
    """Silent groups against the closed form, pass rates, recommended G, length decomposition."""
    input:
        responses=f"{RESULTS}/external/{{run}}/responses.parquet",
    output:
        silent=f"{RESULTS}/external/{{run}}/silent.csv",
        passrates=f"{RESULTS}/external/{{run}}/passrates.parquet",
        recommended_g=f"{RESULTS}/external/{{run}}/recommended_group_size.parquet",
        terms=f"{RESULTS}/external/{{run}}/terms.csv",
        curves=f"{RESULTS}/external/{{run}}/curves.parquet",
        summary=report(
            f"{RESULTS}/external/{{run}}/summary.csv", caption="../report/external_summary.rst",
            category="External runs", labels={"run": "{run}", "kind": "summary"},
        ),
    log:
        f"{RESULTS}/logs/external/{{run}}/diagnose.log",
    benchmark:
        f"{RESULTS}/benchmarks/external/{{run}}/diagnose.tsv"
    params:
        code=fingerprint("diagnose_run"),  # the source it runs: an edit reruns it
        name=lambda wildcards: wildcards.run,
        window_fraction=config["decompose"]["window_fraction"],
        n_boot=config["decompose"]["n_boot"],
        seed=config["decompose"]["seed"],
        fidelity=config["difficulty"]["fidelity"],
    conda:
        "../../envs/grpo-dial.yaml"
    script:
        "../scripts/stage.py"


rule external_figure:
    """Length by correctness, silent groups and the decomposition of one imported run."""
    input:
        curves=f"{RESULTS}/external/{{run}}/curves.parquet",
        silent=f"{RESULTS}/external/{{run}}/silent.csv",
        terms=f"{RESULTS}/external/{{run}}/terms.csv",
    output:
        figure_png=report(
            f"{RESULTS}/figures/external_{{run}}.png", caption="../report/external.rst",
            category="External runs", labels={"run": "{run}", "kind": "figure"},
        ),
        figure_pdf=f"{RESULTS}/figures/external_{{run}}.pdf",
    log:
        f"{RESULTS}/logs/figures/external_{{run}}.log",
    benchmark:
        f"{RESULTS}/benchmarks/figures/external_{{run}}.tsv"
    params:
        code=fingerprint("external_figure"),  # the source it runs: an edit reruns it
        name=lambda wildcards: wildcards.run,
    conda:
        "../../envs/grpo-dial.yaml"
    script:
        "../scripts/stage.py"

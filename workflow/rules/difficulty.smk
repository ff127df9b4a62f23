rule difficulty_analysis:
    """Histogram, gradient-mass shares, silent fractions, recommended G and budget allocation."""
    input:
        table=f"{RESULTS}/passrates/{{table}}.parquet",
    output:
        histogram=f"{RESULTS}/difficulty/{{table}}/histogram.csv",
        mass_shares=f"{RESULTS}/difficulty/{{table}}/mass_shares.csv",
        silent_fractions=f"{RESULTS}/difficulty/{{table}}/silent_fractions.csv",
        recommended_g=f"{RESULTS}/difficulty/{{table}}/recommended_group_size.parquet",
        allocation=f"{RESULTS}/difficulty/{{table}}/allocation.csv",
        allocation_bands=f"{RESULTS}/difficulty/{{table}}/allocation_bands.csv",
        summary=report(
            f"{RESULTS}/difficulty/{{table}}/summary.csv", caption="../report/difficulty_summary.rst",
            category="Difficulty", labels={"table": "{table}", "kind": "summary"},
        ),
    log:
        f"{RESULTS}/logs/difficulty/{{table}}.log",
    benchmark:
        f"{RESULTS}/benchmarks/difficulty/{{table}}.tsv"
    params:
        **config["difficulty"],
    conda:
        "../../envs/grpo-dial.yaml"
    script:
        "../scripts/stage.py"

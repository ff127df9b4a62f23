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
        code=fingerprint("difficulty_analysis"),  # the source it runs: an edit reruns it
        **config["difficulty"],
    conda:
        "../../envs/grpo-dial.yaml"
    script:
        "../scripts/stage.py"


rule difficulty_figure:
    """Pass-rate histogram, gradient-mass share by decile, silent fraction against G."""
    input:
        histogram=f"{RESULTS}/difficulty/{{table}}/histogram.csv",
        mass_shares=f"{RESULTS}/difficulty/{{table}}/mass_shares.csv",
        silent_fractions=f"{RESULTS}/difficulty/{{table}}/silent_fractions.csv",
    output:
        figure_png=report(
            f"{FIG}/difficulty_{{table}}.png",
            caption="../report/difficulty.rst",
            category="Difficulty",
            labels={"table": "{table}", "kind": "figure"},
        ),
        figure_pdf=f"{FIG}/difficulty_{{table}}.pdf",
    log:
        f"{RESULTS}/logs/figures/difficulty_{{table}}.log",
    benchmark:
        f"{RESULTS}/benchmarks/figures/difficulty_{{table}}.tsv"
    params:
        code=fingerprint("difficulty_figure"),  # the source it runs: an edit reruns it
    conda:
        "../../envs/grpo-dial.yaml"
    script:
        "../scripts/stage.py"

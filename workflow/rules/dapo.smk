rule dapo_consistency:
    """Fit E_p[p_T^32] with one timescale to DAPO's logged all-correct fraction (Fig. 3b)."""
    input:
        curve=DAPO_CURVE or [],  # none when the check is off
        table=f"{RESULTS}/passrates/{DAPO['table']}.parquet",
    output:
        summary=report(
            f"{RESULTS}/dapo/fit_summary.csv", caption="../report/dapo_summary.rst", category="DAPO"
        ),
        curve=f"{RESULTS}/dapo/fit_curve.csv",
    log:
        f"{RESULTS}/logs/dapo/dapo_consistency.log",
    benchmark:
        f"{RESULTS}/benchmarks/dapo/dapo_consistency.tsv"
    params:
        code=fingerprint("dapo_consistency"),  # the source it runs: an edit reruns it
        eval_samples=DAPO["eval_samples"],
        n_boot=DAPO["n_boot"],
        seed=DAPO["seed"],
    conda:
        "../../envs/grpo-dial.yaml"
    script:
        "../scripts/stage.py"


rule dapo_figure:
    """DAPO's logged all-correct fraction against the one-timescale closed form."""
    input:
        curve=f"{RESULTS}/dapo/fit_curve.csv",
        summary=f"{RESULTS}/dapo/fit_summary.csv",
    output:
        figure_png=report(f"{FIG}/dapo_fit.png", caption="../report/dapo.rst", category="DAPO"),
        figure_pdf=f"{FIG}/dapo_fit.pdf",
    log:
        f"{RESULTS}/logs/figures/dapo_fit.log",
    benchmark:
        f"{RESULTS}/benchmarks/figures/dapo_fit.tsv"
    params:
        code=fingerprint("dapo_figure"),  # the source it runs: an edit reruns it
    conda:
        "../../envs/grpo-dial.yaml"
    script:
        "../scripts/stage.py"

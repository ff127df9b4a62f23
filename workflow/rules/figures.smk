FIG = f"{RESULTS}/figures"


rule theory_figures:
    """Identity g(k), fidelity against G, difficulty-weight bathtub, silent rate against G, and
    every engine estimator's gradient mass per pass rate."""
    input:
        identity=f"{RESULTS}/theory/identity_curve.csv",
        grid=f"{RESULTS}/theory/fidelity_grid.csv",
        weights=f"{RESULTS}/theory/difficulty_weight.csv",
        estimator_mass=f"{RESULTS}/theory/estimator_mass.csv",
    output:
        identity_png=report(f"{FIG}/identity.png", caption="../report/identity.rst", category="Theory"),
        identity_pdf=f"{FIG}/identity.pdf",
        fidelity_png=report(f"{FIG}/fidelity.png", caption="../report/fidelity.rst", category="Theory"),
        fidelity_pdf=f"{FIG}/fidelity.pdf",
        difficulty_weight_png=report(
            f"{FIG}/difficulty_weight.png", caption="../report/difficulty_weight.rst", category="Theory"
        ),
        difficulty_weight_pdf=f"{FIG}/difficulty_weight.pdf",
        silent_rate_png=report(f"{FIG}/silent_rate.png", caption="../report/silent_rate.rst", category="Theory"),
        silent_rate_pdf=f"{FIG}/silent_rate.pdf",
        estimator_mass_png=report(
            f"{FIG}/estimator_mass.png", caption="../report/estimator_mass.rst", category="Theory"
        ),
        estimator_mass_pdf=f"{FIG}/estimator_mass.pdf",
    log:
        f"{RESULTS}/logs/figures/theory_figures.log",
    benchmark:
        f"{RESULTS}/benchmarks/figures/theory_figures.tsv"
    params:
        pass_rates=config["theory"]["pass_rates"],
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
    conda:
        "../../envs/grpo-dial.yaml"
    script:
        "../scripts/stage.py"


rule simulation_figure:
    """The controlled run: learning per sample, silent fraction, extreme mass, final p by quartile."""
    input:
        steps=f"{RESULTS}/simulate/{{table}}/steps.parquet",
        prompts=f"{RESULTS}/simulate/{{table}}/prompts.parquet",
        summary=f"{RESULTS}/simulate/{{table}}/summary.csv",
    output:
        figure_png=report(
            f"{FIG}/simulation_{{table}}.png",
            caption="../report/simulation.rst",
            category="Simulation",
            labels={"table": "{table}", "kind": "figure"},
        ),
        figure_pdf=f"{FIG}/simulation_{{table}}.pdf",
    log:
        f"{RESULTS}/logs/figures/simulation_{{table}}.log",
    benchmark:
        f"{RESULTS}/benchmarks/figures/simulation_{{table}}.tsv"
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
    conda:
        "../../envs/grpo-dial.yaml"
    script:
        "../scripts/stage.py"

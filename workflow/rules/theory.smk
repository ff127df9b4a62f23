rule theory_tables:
    """Closed forms: group size for fidelity, fidelity and silent-rate grid, difficulty weights."""
    output:
        group_size=report(
            f"{RESULTS}/theory/group_size_table.csv", caption="../report/group_size_table.rst",
            category="Theory",
        ),
        grid=f"{RESULTS}/theory/fidelity_grid.csv",
        weights=f"{RESULTS}/theory/difficulty_weight.csv",
        silent_group_size=f"{RESULTS}/theory/group_size_for_silent_rate.csv",
    log:
        f"{RESULTS}/logs/theory/theory_tables.log",
    benchmark:
        f"{RESULTS}/benchmarks/theory/theory_tables.tsv"
    params:
        code=fingerprint("theory_tables"),  # the source it runs: an edit reruns it
        pass_rates=config["theory"]["pass_rates"],
        fidelities=config["theory"]["fidelities"],
        group_sizes=config["theory"]["group_sizes"],
        p_grid_points=config["theory"]["p_grid_points"],
        silent_deltas=config["theory"]["silent_deltas"],
    conda:
        "../../envs/grpo-dial.yaml"
    script:
        "../scripts/stage.py"


rule identity_check:
    """Monte-Carlo check of (1/G) sum_i A_i s_i = sigma^(2-alpha) (s+ - s-) through advantage.py."""
    output:
        curve=f"{RESULTS}/theory/identity_curve.csv",
        residuals=f"{RESULTS}/theory/identity_residuals.csv",
    log:
        f"{RESULTS}/logs/theory/identity_check.log",
    benchmark:
        f"{RESULTS}/benchmarks/theory/identity_check.tsv"
    params:
        code=fingerprint("identity_check"),  # the source it runs: an edit reruns it
        **config["theory"]["identity"],
    conda:
        "../../envs/grpo-dial.yaml"
    script:
        "../scripts/stage.py"


rule group_bias:
    """Non-degenerate-group baseline bias (arXiv 2601.08521) and HA-DW's correction, with an MC check."""
    output:
        table=f"{RESULTS}/theory/group_bias.csv",
    log:
        f"{RESULTS}/logs/theory/group_bias.log",
    benchmark:
        f"{RESULTS}/benchmarks/theory/group_bias.tsv"
    params:
        code=fingerprint("group_bias"),  # the source it runs: an edit reruns it
        **config["theory"]["group_bias"],
    conda:
        "../../envs/grpo-dial.yaml"
    script:
        "../scripts/stage.py"


rule estimator_tables:
    """Every engine estimator's gradient mass per pass rate, and which are Dr. GRPO up to a constant."""
    output:
        mass=report(
            f"{RESULTS}/theory/estimator_mass.csv", caption="../report/estimator_mass_table.rst",
            category="Theory",
        ),
        identity=report(
            f"{RESULTS}/theory/estimator_identity.csv",
            caption="../report/estimator_identity.rst", category="Theory",
        ),
    log:
        f"{RESULTS}/logs/theory/estimator_tables.log",
    benchmark:
        f"{RESULTS}/benchmarks/theory/estimator_tables.tsv"
    params:
        code=fingerprint("estimator_tables"),  # the source it runs: an edit reruns it
        p_grid_points=config["theory"]["p_grid_points"],
        **config["theory"]["estimators"],
    conda:
        "../../envs/grpo-dial.yaml"
    script:
        "../scripts/stage.py"


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
        code=fingerprint("theory_figures"),  # the source it runs: an edit reruns it
        pass_rates=config["theory"]["pass_rates"],
    conda:
        "../../envs/grpo-dial.yaml"
    script:
        "../scripts/stage.py"

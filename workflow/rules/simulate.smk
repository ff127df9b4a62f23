rule simulate:
    """The paper's controlled Bernoulli-logit run: one parameter per prompt, one arm per dial."""
    input:
        table=f"{RESULTS}/passrates/{{table}}.parquet",
    output:
        steps=f"{RESULTS}/simulate/{{table}}/steps.parquet",
        prompts=f"{RESULTS}/simulate/{{table}}/prompts.parquet",
        summary=report(
            f"{RESULTS}/simulate/{{table}}/summary.csv", caption="../report/simulation_summary.rst",
            category="Simulation", labels={"table": "{table}", "kind": "summary"},
        ),
    log:
        f"{RESULTS}/logs/simulate/{{table}}.log",
    benchmark:
        f"{RESULTS}/benchmarks/simulate/{{table}}.tsv"
    params:
        code=fingerprint("simulate"),  # the source it runs: an edit reruns it
        n_prompts=config["simulate"]["n_prompts"],
        group_size=config["simulate"]["group_size"],
        steps=config["simulate"]["steps"],
        lr=config["simulate"]["lr"],
        seed=config["simulate"]["seed"],
        max_resample_rounds=config["simulate"]["max_resample_rounds"],
        arms=config["simulate"]["arms"],
        interior_only=config["simulate"]["interior_only"],
        p_clip=config["simulate"]["p_clip"],
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
    params:
        code=fingerprint("simulation_figure"),  # the source it runs: an edit reruns it
    conda:
        "../../envs/grpo-dial.yaml"
    script:
        "../scripts/stage.py"

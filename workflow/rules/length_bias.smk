LB = config["length_bias"]


rule length_bias:
    """The length twin of the controlled run: tail drift per dial against the closed form."""
    input:
        table=f"{RESULTS}/passrates/{{table}}.parquet",
    output:
        steps=f"{RESULTS}/length_bias/{{table}}/steps.parquet",
        prompts=f"{RESULTS}/length_bias/{{table}}/prompts.parquet",
        summary=report(
            f"{RESULTS}/length_bias/{{table}}/summary.csv", caption="../report/length_bias_summary.rst",
            category="Length bias", labels={"table": "{table}", "kind": "summary"},
        ),
        fit=f"{RESULTS}/length_bias/{{table}}/fit.csv",
        curve=f"{RESULTS}/length_bias/{{table}}/curve.csv",
    log:
        f"{RESULTS}/logs/length_bias/{{table}}.log",
    benchmark:
        f"{RESULTS}/benchmarks/length_bias/{{table}}.tsv"
    params:
        code=fingerprint("length_bias"),  # the source it runs: an edit reruns it
        **{key: LB[key] for key in LENGTH_BIAS_KEYS},
    conda:
        "../../envs/grpo-dial.yaml"
    script:
        "../scripts/stage.py"


rule length_bias_figure:
    """Tails over steps, measured against predicted drift, drift against awareness, ratios."""
    input:
        steps=f"{RESULTS}/length_bias/{{table}}/steps.parquet",
        summary=f"{RESULTS}/length_bias/{{table}}/summary.csv",
        fit=f"{RESULTS}/length_bias/{{table}}/fit.csv",
        curve=f"{RESULTS}/length_bias/{{table}}/curve.csv",
    output:
        figure_png=report(
            f"{RESULTS}/figures/length_bias_{{table}}.png", caption="../report/length_bias.rst",
            category="Length bias", labels={"table": "{table}", "kind": "figure"},
        ),
        figure_pdf=f"{RESULTS}/figures/length_bias_{{table}}.pdf",
    log:
        f"{RESULTS}/logs/figures/length_bias_{{table}}.log",
    benchmark:
        f"{RESULTS}/benchmarks/figures/length_bias_{{table}}.tsv"
    params:
        code=fingerprint("length_bias_figure"),  # the source it runs: an edit reruns it
    conda:
        "../../envs/grpo-dial.yaml"
    script:
        "../scripts/stage.py"


rule length_pressure:
    """Per step, how much more the run's normalizer pushes long wrong answers than a neutral one."""
    input:
        responses=run_files("responses.parquet"),
        steps=run_files("steps.parquet"),
        terms=decomposition_files("terms.csv"),
    output:
        steps=f"{RESULTS}/length_pressure/steps.csv",
        summary=report(
            f"{RESULTS}/length_pressure/summary.csv", caption="../report/length_pressure_summary.rst",
            category="Length bias",
        ),
        runs=f"{RESULTS}/length_pressure/runs.csv",
        prediction=f"{RESULTS}/length_pressure/prediction.csv",
    log:
        f"{RESULTS}/logs/length_pressure/train.log",
    benchmark:
        f"{RESULTS}/benchmarks/length_pressure/train.tsv"
    params:
        code=fingerprint("length_pressure"),  # the source it runs: an edit reruns it
        runs=RUNS,
        dials=DIAL_FIELDS,
        window_fraction=config["decompose"]["window_fraction"],
    conda:
        "../../envs/grpo-dial.yaml"
    script:
        "../scripts/stage.py"


rule length_pressure_external:
    """The same lens for an imported run, under every normalizer (its own marked `used`)."""
    input:
        responses=f"{RESULTS}/external/{{run}}/responses.parquet",
    output:
        steps=f"{RESULTS}/external/{{run}}/length_pressure.csv",
    log:
        f"{RESULTS}/logs/external/{{run}}/length_pressure.log",
    benchmark:
        f"{RESULTS}/benchmarks/external/{{run}}/length_pressure.tsv"
    params:
        code=fingerprint("length_pressure_external"),  # the source it runs: an edit reruns it
        name=lambda wildcards: wildcards.run,
        normalizer=lambda wildcards: LB["run_normalizers"].get(wildcards.run),
    conda:
        "../../envs/grpo-dial.yaml"
    script:
        "../scripts/stage.py"


rule length_pressure_figure:
    """Length pressure per step and arm, against each arm's wrong-answer length change."""
    input:
        steps=f"{RESULTS}/length_pressure/steps.csv",
        runs=f"{RESULTS}/length_pressure/runs.csv",
        prediction=f"{RESULTS}/length_pressure/prediction.csv",
    output:
        figure_png=report(
            f"{RESULTS}/figures/length_pressure.png", caption="../report/length_pressure.rst",
            category="Length bias",
        ),
        figure_pdf=f"{RESULTS}/figures/length_pressure.pdf",
    log:
        f"{RESULTS}/logs/figures/length_pressure.log",
    benchmark:
        f"{RESULTS}/benchmarks/figures/length_pressure.tsv"
    params:
        code=fingerprint("length_pressure_figure"),  # the source it runs: an edit reruns it
    conda:
        "../../envs/grpo-dial.yaml"
    script:
        "../scripts/stage.py"

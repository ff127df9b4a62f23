rule channel_base:
    """The base policy's checking-tail channel: sampled responses, their checks and verdicts."""
    input:
        model=BASE_MODEL,
    output:
        samples=f"{RESULTS}/channel/base/samples.parquet",
    log:
        f"{RESULTS}/logs/channel/base.log",
    benchmark:
        f"{RESULTS}/benchmarks/channel/base.tsv"
    threads: config["train"]["threads"]
    params:
        code=fingerprint("channel_base"),  # the source it runs: an edit reruns it
        **CHANNEL_PARAMS,
        model=config["model"]["base"],
    conda:
        "../../envs/grpo-dial.yaml"
    script:
        "../scripts/stage.py"


rule channel_run:
    """One run's final policy's checking-tail channel, sampled like the base policy's."""
    input:
        model=f"{RESULTS}/train/{{dial}}/seed{{seed}}/final",
    output:
        samples=f"{RESULTS}/channel/{{dial}}/seed{{seed}}/samples.parquet",
    log:
        f"{RESULTS}/logs/channel/{{dial}}/seed{{seed}}.log",
    benchmark:
        f"{RESULTS}/benchmarks/channel/{{dial}}/seed{{seed}}.tsv"
    threads: config["train"]["threads"]
    params:
        code=fingerprint("channel_run"),  # the source it runs: an edit reruns it
        **CHANNEL_PARAMS,
    conda:
        "../../envs/grpo-dial.yaml"
    script:
        "../scripts/stage.py"


rule channel_summary:
    """The channel per policy, tail awareness per step, tail drift per run and per dial."""
    input:
        samples=[f"{RESULTS}/channel/base/samples.parquet"]
        + [f"{RESULTS}/channel/{dial}/seed{seed}/samples.parquet" for dial, seed in RUNS],
        responses=run_files("responses.parquet"),
        terms=decomposition_files("terms.csv"),
        passrates=f"{RESULTS}/passrates/{POLICY_TABLE}.parquet",
    output:
        channel=f"{RESULTS}/channel/channel.csv",
        awareness=f"{RESULTS}/channel/awareness.parquet",
        runs=f"{RESULTS}/channel/drift_runs.csv",
        drift=report(
            f"{RESULTS}/channel/drift.csv", caption="../report/channel_drift_table.rst",
            category="Length by correctness",
        ),
    log:
        f"{RESULTS}/logs/channel/channel_summary.log",
    benchmark:
        f"{RESULTS}/benchmarks/channel/channel_summary.tsv"
    params:
        code=fingerprint("channel_summary"),  # the source it runs: an edit reruns it
        runs=RUNS,
        dials=DIAL_FIELDS,
        group_size=config["train"]["group_size"],
        window_fraction=config["decompose"]["window_fraction"],
        reference=config["channel"]["reference"],
    conda:
        "../../envs/grpo-dial.yaml"
    script:
        "../scripts/stage.py"


rule channel_figures:
    """The channel over training and the tail drift of each arm against GRPO and the prediction."""
    input:
        channel=f"{RESULTS}/channel/channel.csv",
        awareness=f"{RESULTS}/channel/awareness.parquet",
        runs=f"{RESULTS}/channel/drift_runs.csv",
        drift=f"{RESULTS}/channel/drift.csv",
    output:
        channel_png=report(
            f"{RESULTS}/figures/channel.png", caption="../report/channel.rst",
            category="Length by correctness",
        ),
        channel_pdf=f"{RESULTS}/figures/channel.pdf",
        drift_png=report(
            f"{RESULTS}/figures/length_drift_runs.png", caption="../report/length_drift_runs.rst",
            category="Length by correctness",
        ),
        drift_pdf=f"{RESULTS}/figures/length_drift_runs.pdf",
    log:
        f"{RESULTS}/logs/figures/channel_figures.log",
    benchmark:
        f"{RESULTS}/benchmarks/figures/channel_figures.tsv"
    params:
        code=fingerprint("channel_figures"),  # the source it runs: an edit reruns it
        reference=config["channel"]["reference"],
    conda:
        "../../envs/grpo-dial.yaml"
    script:
        "../scripts/stage.py"

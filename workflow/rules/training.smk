rule decompose_length:
    """Mix / within-correct / within-incorrect split of one run's length change, with intervals."""
    input:
        responses=f"{RESULTS}/train/{{dial}}/seed{{seed}}/responses.parquet",
        passrates=f"{RESULTS}/passrates/{POLICY_TABLE}.parquet",
    output:
        terms=f"{RESULTS}/decompose/{{dial}}/seed{{seed}}/terms.csv",
        curves=f"{RESULTS}/decompose/{{dial}}/seed{{seed}}/curves.parquet",
    log:
        f"{RESULTS}/logs/decompose/{{dial}}/seed{{seed}}.log",
    benchmark:
        f"{RESULTS}/benchmarks/decompose/{{dial}}/seed{{seed}}.tsv"
    params:
        code=fingerprint("decompose_length"),  # the source it runs: an edit reruns it
        **config["decompose"],
    conda:
        "../../envs/grpo-dial.yaml"
    script:
        "../scripts/stage.py"


rule training_summary:
    """One row per dial and seed, and the gathered tables every training figure is drawn from."""
    input:
        steps=run_files("steps.parquet"),
        responses=run_files("responses.parquet"),
        mass=run_files("mass.parquet"),
        evals=run_files("evals.parquet"),
        identity=run_files("identity.parquet"),
        terms=decomposition_files("terms.csv"),
        curves=decomposition_files("curves.parquet"),
        passrates=f"{RESULTS}/passrates/{POLICY_TABLE}.parquet",
    output:
        summary=report(
            f"{RESULTS}/decompose/summary.csv", caption="../report/training_summary.rst",
            category="Length by correctness",
        ),
        steps=f"{RESULTS}/decompose/all_steps.parquet",
        terms=f"{RESULTS}/decompose/all_terms.csv",
        curves=f"{RESULTS}/decompose/all_curves.parquet",
        identity=f"{RESULTS}/decompose/all_identity.parquet",
        evals=f"{RESULTS}/decompose/all_evals.parquet",
    log:
        f"{RESULTS}/logs/decompose/training_summary.log",
    benchmark:
        f"{RESULTS}/benchmarks/decompose/training_summary.tsv"
    params:
        code=fingerprint("training_summary"),  # the source it runs: an edit reruns it
        runs=RUNS,
        prompts_per_step=config["train"]["prompts_per_step"],
        group_size=config["train"]["group_size"],
    conda:
        "../../envs/grpo-dial.yaml"
    script:
        "../scripts/stage.py"


rule window_sensitivity:
    """Each run's length split at several window fractions: the stable terms beside the share."""
    input:
        responses=run_files("responses.parquet"),
    output:
        windows=report(
            f"{RESULTS}/decompose/windows.csv", caption="../report/window_sensitivity.rst",
            category="Length by correctness",
        ),
    log:
        f"{RESULTS}/logs/decompose/window_sensitivity.log",
    benchmark:
        f"{RESULTS}/benchmarks/decompose/window_sensitivity.tsv"
    params:
        code=fingerprint("window_sensitivity"),  # the source it runs: an edit reruns it
        runs=RUNS,
        fractions=config["window_sensitivity"]["fractions"],
        n_boot=config["decompose"]["n_boot"],
        seed=config["decompose"]["seed"],
    conda:
        "../../envs/grpo-dial.yaml"
    script:
        "../scripts/stage.py"


rule training_figures:
    """Length curves, decomposition, accuracy vs length, silent fraction, identity on the model."""
    input:
        steps=f"{RESULTS}/decompose/all_steps.parquet",
        terms=f"{RESULTS}/decompose/all_terms.csv",
        curves=f"{RESULTS}/decompose/all_curves.parquet",
        identity=f"{RESULTS}/decompose/all_identity.parquet",
    output:
        **{
            f"{name}_png": report(
                f"{RESULTS}/figures/{name}.png", caption=f"../report/{name}.rst",
                category="Length by correctness",
            )
            for name in TRAINING_FIGURES
        },
        **{f"{name}_pdf": f"{RESULTS}/figures/{name}.pdf" for name in TRAINING_FIGURES},
    log:
        f"{RESULTS}/logs/figures/training_figures.log",
    benchmark:
        f"{RESULTS}/benchmarks/figures/training_figures.tsv"
    params:
        code=fingerprint("training_figures"),  # the source it runs: an edit reruns it
    conda:
        "../../envs/grpo-dial.yaml"
    script:
        "../scripts/stage.py"

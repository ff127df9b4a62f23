rule passrates:
    """One pass-rate table in the tidy schema, from the configured source."""
    input:
        unpack(passrate_input),
    output:
        table=f"{RESULTS}/passrates/{{table}}.parquet",
    log:
        f"{RESULTS}/logs/passrates/{{table}}.log",
    benchmark:
        f"{RESULTS}/benchmarks/passrates/{{table}}.tsv"
    wildcard_constraints:
        table=CONFIGURED_TABLE_PATTERN,
    params:
        code=fingerprint("passrates"),  # the source it runs: an edit reruns it
        spec=passrate_spec,
    conda:
        "../../envs/grpo-dial.yaml"
    script:
        "../scripts/stage.py"

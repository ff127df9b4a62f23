rule download:
    """One public data file from its pinned origin (public_data), sha256-checked, into resources_dir."""
    output:
        file=f"{RESOURCES}/{{file}}",
    log:
        f"{RESULTS}/logs/download/{{file}}.log",
    wildcard_constraints:
        file="|".join(re.escape(name) for name in PUBLIC_FILES) or "NONE",
    params:
        code=fingerprint("download"),  # the source it runs: an edit reruns it
        url=lambda wildcards: PUBLIC[PUBLIC_FILES[wildcards.file]]["url"],
        sha256=lambda wildcards: PUBLIC[PUBLIC_FILES[wildcards.file]]["sha256"],
        offline=OFFLINE,
    conda:
        "../../envs/grpo-dial.yaml"
    script:
        "../scripts/stage.py"

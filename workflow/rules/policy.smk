rule warm_start:
    """Train the base policy on the task's demonstrations: the tiny character-level Llama built
    here, or the pretrained model.base (warm_start.pretrained)."""
    input:
        **TASK_INPUTS,
        **({"pretrained": WARM_START_FROM} if WARM_START_FROM else {}),
    output:
        model=directory(f"{RESULTS}/policy/base"),
        loss=f"{RESULTS}/policy/warm_start_loss.csv",
    log:
        f"{RESULTS}/logs/policy/warm_start.log",
    benchmark:
        f"{RESULTS}/benchmarks/policy/warm_start.tsv"
    threads: workflow.cores
    resources:
        gpu=GPU,
    params:
        code=fingerprint("warm_start"),  # the source it runs: an edit reruns it
        task=TASK,
        spec=config["model"]["spec"],
        model_seed=config["model"]["seed"],
        base=config["model"]["base"],
        device=config["model"]["device"],
        warm_start=config["warm_start"],
    conda:
        "../../envs/grpo-dial.yaml"
    script:
        "../scripts/stage.py"


rule estimate_pass_rates:
    """n samples for every prompt of the training pool, verified: the base policy's pass rates."""
    input:
        **TASK_INPUTS,
        model=BASE_MODEL,
    output:
        table=f"{RESULTS}/passrates/{POLICY_TABLE}.parquet",
    log:
        f"{RESULTS}/logs/policy/estimate_pass_rates.log",
    benchmark:
        f"{RESULTS}/benchmarks/policy/estimate_pass_rates.tsv"
    threads: workflow.cores
    resources:
        gpu=GPU,
    params:
        code=fingerprint("estimate_pass_rates"),  # the source it runs: an edit reruns it
        task=TASK,
        model=config["model"]["base"],
        device=config["model"]["device"],
        attn_implementation=config["model"]["attn_implementation"],
        pass_rates=config["pass_rates"],
    conda:
        "../../envs/grpo-dial.yaml"
    script:
        "../scripts/stage.py"


rule calibrate_lr:
    """Norm of one optimizer step of a dial on a calibration batch (learning-rate matching)."""
    input:
        **TASK_INPUTS,
        model=BASE_MODEL,
    output:
        calibration=f"{RESULTS}/train/{{dial}}/lr_calibration.csv",
    log:
        f"{RESULTS}/logs/train/{{dial}}/lr_calibration.log",
    benchmark:
        f"{RESULTS}/benchmarks/train/{{dial}}/lr_calibration.tsv"
    threads: config["train"]["threads"]
    resources:
        gpu=GPU,
    params:
        code=fingerprint("calibrate_lr"),  # the source it runs: an edit reruns it
        task=TASK,
        model=config["model"]["base"],
        device=config["model"]["device"],
        attn_implementation=config["model"]["attn_implementation"],
        arm=lambda wildcards: ARM_FIELDS[wildcards.dial],
        train=train_params,
        pass_rates=config["pass_rates"],
    conda:
        "../../envs/grpo-dial.yaml"
    script:
        "../scripts/stage.py"


from grpo_dial.backends.trl.launch import job_gpus, job_note  # noqa: E402 (no torch)

for _dial, _backend in BACKENDS.items():  # each trl arm's GPUs and launch command
    if (_line := job_note(_dial, _backend, config["train"], config["model"]["device"])) is not None:
        print(f"grpo-dial: {_line}", file=sys.stderr)


rule train:
    """One RL run of one dial setting and seed: steps, responses, mass, evals, identity probes."""
    input:
        unpack(train_inputs),
    output:
        steps=f"{RESULTS}/train/{{dial}}/seed{{seed}}/steps.parquet",
        responses=f"{RESULTS}/train/{{dial}}/seed{{seed}}/responses.parquet",
        mass=f"{RESULTS}/train/{{dial}}/seed{{seed}}/mass.parquet",
        evals=f"{RESULTS}/train/{{dial}}/seed{{seed}}/evals.parquet",
        identity=f"{RESULTS}/train/{{dial}}/seed{{seed}}/identity.parquet",
        allocation=f"{RESULTS}/train/{{dial}}/seed{{seed}}/allocation.parquet",
        model=directory(f"{RESULTS}/train/{{dial}}/seed{{seed}}/final"),
    log:
        f"{RESULTS}/logs/train/{{dial}}/seed{{seed}}.log",
    benchmark:
        f"{RESULTS}/benchmarks/train/{{dial}}/seed{{seed}}.tsv"
    threads: config["train"]["threads"]
    resources:
        gpu=lambda w: job_gpus(BACKENDS[w.dial], config["train"], config["model"]["device"]),
    params:
        code=fingerprint("train"),  # the source it runs: an edit reruns it
        task=TASK,
        model=config["model"]["base"],
        device=config["model"]["device"],
        attn_implementation=config["model"]["attn_implementation"],
        arm=lambda wildcards: ARM_FIELDS[wildcards.dial],
        train=train_params,
        pass_rates=config["pass_rates"],
        seed=lambda wildcards: int(wildcards.seed),
        checkpoint_dir=lambda wildcards: f"{RESULTS}/checkpoints/{wildcards.dial}/seed{wildcards.seed}",
        trl=config["train"]["trl"],
    conda:
        "../../envs/grpo-dial.yaml"
    script:
        "../scripts/stage.py"

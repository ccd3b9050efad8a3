# The run stages: train, adapt (starts from a trained run's state), structure (no data).
# A training job trains the runs of PLAN.train_jobs[batch] one after the other (the seeds of
# one configuration, or one run: config `runs_per_job`), each into its own runs/<run>/
# directory, then writes the job's record runs/<batch>.json, the file the workflow tracks.


rule train:
    """Train the runs of one job (the seeds of a configuration, or one run) with the FL engine;
    resumes after a kill."""
    input:
        unpack(train_inputs),
    output:
        f"{R}/runs/{{batch}}.json",
    log:
        f"{R}/logs/train/{{batch}}.log",
    benchmark:
        f"{R}/benchmarks/train/{{batch}}.tsv"
    retries: RETRIES["train"]
    conda:
        ENV
    threads: config["threads"]
    resources:
        **resources("train", "batch"),
        gpu=config["gpus_per_train"],
    params:
        command=job_command("train.py"),
        runs=train_runs,
        backbone=backbone_arg,
        device=DEVICE,
    shell:
        "{params.command} --runs-json {params.runs:q} --data-dir $(dirname {input.train})"
        " --record {output} {params.backbone} --device {params.device} --threads {threads}"
        " > {log} 2>&1"


# An adaptation job adapts the runs of one training job alike (PLAN.adapt_jobs[adapt]), each
# into its own adapt/<id>/ directory, then writes its record adapt/<adapt>.json.
rule adapt:
    """Adapt trained runs (test-time adaptation, fine-tuning, client training); resumes after a
    kill."""
    input:
        unpack(adapt_inputs),
    output:
        f"{R}/adapt/{{adapt}}.json",
    log:
        f"{R}/logs/adapt/{{adapt}}.log",
    benchmark:
        f"{R}/benchmarks/adapt/{{adapt}}.tsv"
    retries: RETRIES["adapt"]
    conda:
        ENV
    threads: config["threads"]
    resources:
        **resources("adapt", "adapt"),
        gpu=config["gpus_per_train"],
    params:
        command=job_command("adapt.py"),
        adapts=adapt_runs,
        backbone=backbone_arg,
        device=DEVICE,
    shell:
        "{params.command} --adapts-json {params.adapts:q} --data-dir $(dirname {input.train})"
        " --record {output} {params.backbone} --device {params.device} --threads {threads}"
        " > {log} 2>&1"


rule structure:
    """Count parameters and payloads of a paper-scale architecture on the meta device (no weights,
    no data)."""
    output:
        f"{R}/structure/{{structure}}.json",
    log:
        f"{R}/logs/structure/{{structure}}.log",
    benchmark:
        f"{R}/benchmarks/structure/{{structure}}.tsv"
    conda:
        ENV
    resources:
        **resources("structure"),
    params:
        spec=lambda wildcards: PLAN.structures[wildcards.structure],
    script:
        "../scripts/structure.py"

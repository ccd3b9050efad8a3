# The run stages: train, adapt (starts from a trained run's state), structure (no data).


rule train:
    input:
        unpack(train_inputs),
    output:
        config=f"{R}/runs/{{run}}/config.json",
        metrics=f"{R}/runs/{{run}}/metrics.json",
        history=f"{R}/runs/{{run}}/history.csv",
        state=f"{R}/runs/{{run}}/state.safetensors",
    log:
        f"{R}/logs/train/{{run}}.log",
    benchmark:
        f"{R}/benchmarks/train/{{run}}.tsv"
    conda:
        ENV
    threads: config["threads"]
    resources:
        **resources("train", "run"),
        gpu=config["gpus_per_train"],
    params:
        command=job_command("train.py"),
        spec=lambda wildcards: json.dumps(PLAN.runs[wildcards.run]),
        backbone=backbone_arg,
        device=DEVICE,
    shell:
        "{params.command} --config-json {params.spec:q} --data-dir $(dirname {input.train})"
        " --partition {input.partition} --out-dir $(dirname {output.metrics}) {params.backbone}"
        " --device {params.device} --threads {threads} > {log} 2>&1"


rule adapt:
    input:
        unpack(adapt_inputs),
    output:
        config=f"{R}/adapt/{{adapt}}/config.json",
        metrics=f"{R}/adapt/{{adapt}}/metrics.json",
        history=f"{R}/adapt/{{adapt}}/history.csv",
    log:
        f"{R}/logs/adapt/{{adapt}}.log",
    benchmark:
        f"{R}/benchmarks/adapt/{{adapt}}.tsv"
    conda:
        ENV
    threads: config["threads"]
    resources:
        **resources("adapt", "adapt"),
        gpu=config["gpus_per_train"],
    params:
        command=job_command("adapt.py"),
        spec=lambda wildcards: json.dumps(PLAN.adapts[wildcards.adapt]["adapt"]),
        backbone=backbone_arg,
        device=DEVICE,
    shell:
        "{params.command} --adapt-json {params.spec:q} --run-dir $(dirname {input.state})"
        " --data-dir $(dirname {input.train}) --partition {input.partition}"
        " --out-dir $(dirname {output.metrics}) {params.backbone}"
        " --device {params.device} --threads {threads} > {log} 2>&1"


rule structure:
    output:
        f"{R}/structure/{{structure}}.json",
    log:
        f"{R}/logs/structure/{{structure}}.log",
    conda:
        ENV
    resources:
        **resources("structure"),
    params:
        spec=lambda wildcards: PLAN.structures[wildcards.structure],
    script:
        "../scripts/structure.py"

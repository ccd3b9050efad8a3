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
    conda:
        ENV
    threads: config["threads"]
    resources:
        gpu=config["gpus_per_train"],
    params:
        spec=lambda wildcards: json.dumps(PLAN.runs[wildcards.run]),
        backbone=backbone_arg,
        device=DEVICE,
    shell:
        "python workflow/scripts/train.py --config-json {params.spec:q} --data-dir $(dirname {input.train})"
        " --partition {input.partition} --out-dir $(dirname {output.metrics}) {params.backbone}"
        " --device {params.device} --threads {threads} > {log} 2>&1"

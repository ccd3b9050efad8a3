rule train:
    input:
        unpack(train_inputs),
    output:
        metrics=f"{R}/runs/{{run}}/metrics.json",
        history=f"{R}/runs/{{run}}/history.csv",
        state=f"{R}/runs/{{run}}/state.safetensors",
    log:
        f"{R}/logs/train/{{run}}.log",
    threads: 1
    resources:
        gpu=config["gpus_per_train"],
    conda:
        ENV
    params:
        backbone=backbone_arg,
        job=JOB,
    shell:
        "python workflow/scripts/train.py --config {input.spec} --data-dir $(dirname {input.train})"
        " --partition {input.partition} --out-dir $(dirname {output.metrics}) {params.backbone}"
        " {params.job} > {log} 2>&1"

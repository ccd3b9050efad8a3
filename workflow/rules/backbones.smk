rule pretrain_backbone:
    input:
        unpack(pretrain_inputs),
    output:
        f"{R}/backbones/pretrained/{{backbone}}.safetensors",
    log:
        f"{R}/logs/backbones/{{backbone}}.log",
    conda:
        ENV
    threads: 2
    params:
        spec=lambda wildcards: json.dumps(PLAN.backbones[wildcards.backbone]),
        device=DEVICE,
    shell:
        "python workflow/scripts/pretrain_backbone.py --backbone {wildcards.backbone}"
        " --spec-json {params.spec:q} --data-dir $(dirname {input.train}) --out {output}"
        " --device {params.device} --threads {threads} > {log} 2>&1"


rule fetch_backbone:
    output:
        f"{R}/backbones/fetched/{{backbone}}.safetensors",
    log:
        f"{R}/logs/backbones/{{backbone}}.log",
    retries: 2
    localrule: True
    conda:
        ENV
    params:
        root=DATA_ROOT,
    shell:
        "python workflow/scripts/fetch_backbone.py {wildcards.backbone} {output}"
        " --data-root {params.root} > {log} 2>&1"

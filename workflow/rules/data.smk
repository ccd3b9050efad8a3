rule write_spec:
    output:
        f"{R}/specs/{{kind}}/{{name}}.json",
    log:
        f"{R}/logs/specs/{{kind}}/{{name}}.log",
    localrule: True
    wildcard_constraints:
        kind="run|partition|backbone|item|claims",
        name=r"[A-Za-z0-9_.\-/]+",
    params:
        spec=lambda wildcards: spec_for(wildcards.kind, wildcards.name),
    run:
        write_json(output[0], params.spec)


rule download_data:
    output:
        touch(f"{DATA_ROOT}/{{dataset}}/.fetched"),
    log:
        f"{R}/logs/download/{{dataset}}.log",
    localrule: True
    retries: 2
    conda:
        ENV
    params:
        root=data_root_of,
    shell:
        "python workflow/scripts/download_data.py --dataset {wildcards.dataset}"
        " --data-root {params.root} --out-flag {output} > {log} 2>&1"


rule prepare_data:
    input:
        raw_inputs,
    output:
        train=f"{R}/data/{{dataset}}/train.safetensors",
        test=f"{R}/data/{{dataset}}/test.safetensors",
    log:
        f"{R}/logs/data/{{dataset}}.log",
    conda:
        ENV
    params:
        scale=SCALE,
        root=DATA_ROOT,
        args=data_args,
    shell:
        "python workflow/scripts/prepare_data.py --dataset {wildcards.dataset} --scale {params.scale}"
        " --raw-dir {params.root}/{wildcards.dataset} --out-dir $(dirname {output.train})"
        " {params.args} > {log} 2>&1"


rule partition:
    input:
        unpack(partition_inputs),
        spec=f"{R}/specs/partition/{{pid}}.json",
    output:
        f"{R}/partitions/{{pid}}.json",
    log:
        f"{R}/logs/partition/{{pid}}.log",
    conda:
        ENV
    shell:
        "python workflow/scripts/partition.py --spec {input.spec} --train {input.train}"
        " --test {input.test} --out {output} > {log} 2>&1"

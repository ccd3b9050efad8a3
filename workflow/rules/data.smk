rule download_data:
    output:
        touch(f"{DATA_ROOT}/{{dataset}}/.fetched"),
    log:
        f"{R}/logs/download/{{dataset}}.log",
    retries: 2
    localrule: True
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
    wildcard_constraints:
        dataset=TRAIN_TEST,
    conda:
        ENV
    params:
        scale=SCALE,
        root=DATA_ROOT,
        args=data_args,
    shell:
        "python workflow/scripts/prepare_data.py --dataset {wildcards.dataset} --scale {params.scale}"
        " --raw-dir {params.root}/{wildcards.dataset} --out-dir $(dirname {output.test})"
        " {params.args} > {log} 2>&1"


rule prepare_test_only_data:
    input:
        raw_inputs,
    output:
        test=f"{R}/data/{{dataset}}/test.safetensors",
    log:
        f"{R}/logs/data/{{dataset}}.log",
    wildcard_constraints:
        dataset=TEST_ONLY,
    conda:
        ENV
    params:
        scale=SCALE,
        root=DATA_ROOT,
        args=data_args,
    shell:
        "python workflow/scripts/prepare_data.py --dataset {wildcards.dataset} --scale {params.scale}"
        " --raw-dir {params.root}/{wildcards.dataset} --out-dir $(dirname {output.test})"
        " {params.args} > {log} 2>&1"


rule partition:
    input:
        unpack(partition_inputs),
    output:
        f"{R}/partitions/{{pid}}.json",
    log:
        f"{R}/logs/partition/{{pid}}.log",
    conda:
        ENV
    params:
        spec=lambda wildcards: json.dumps(PLAN.partitions[wildcards.pid]),
    shell:
        "python workflow/scripts/partition.py --spec-json {params.spec:q} --train {input.train}"
        " --test {input.test} --out {output} > {log} 2>&1"


rule partition_figure:
    input:
        f"{R}/partitions/{{pid}}.json",
    output:
        png=f"{R}/partitions/{{pid}}.png",
        pdf=f"{R}/partitions/{{pid}}.pdf",
    log:
        f"{R}/logs/partition/{{pid}}.figure.log",
    conda:
        ENV
    params:
        manifest=partition_manifest,
        runs=f"{R}/runs",
        partitions=lambda wildcards, input: str(Path(input[0]).parent),
    script:
        "../scripts/make_figure.py"

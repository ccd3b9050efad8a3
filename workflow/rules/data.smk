rule download_data:
    """Download a dataset's raw files into data_root and check their checksums (local: needs the
    network)."""
    output:
        touch(f"{DATA_ROOT}/{{dataset}}/.fetched"),
    log:
        f"{R}/logs/download/{{dataset}}.log",
    retries: 2
    localrule: True
    conda:
        ENV
    params:
        command=job_command("download_data.py"),
        root=data_root_of,
    shell:
        "{params.command} --dataset {wildcards.dataset}"
        " --data-root {params.root} --out-flag {output} > {log} 2>&1"


rule prepare_data:
    """Parse the raw files (or synthesize the analog at mini scale) into prepared train and test
    splits."""
    input:
        raw_inputs,
    output:
        train=f"{R}/data/{{dataset}}/train.safetensors",
        test=f"{R}/data/{{dataset}}/test.safetensors",
    log:
        f"{R}/logs/data/{{dataset}}.log",
    benchmark:
        f"{R}/benchmarks/data/{{dataset}}.tsv"
    wildcard_constraints:
        dataset=TRAIN_TEST,
    conda:
        ENV
    resources:
        **resources("data", "dataset"),
    params:
        command=job_command("prepare_data.py"),
        scale=prepare_scale,
        root=DATA_ROOT,
        args=data_args,
    shell:
        "{params.command} --dataset {wildcards.dataset} --scale {params.scale}"
        " --raw-dir {params.root}/{wildcards.dataset} --out-dir $(dirname {output.test})"
        " {params.args} > {log} 2>&1"


# Datasets with only a test split (CIFAR-10-C, CIFAR-10.1).
use rule prepare_data as prepare_test_only_data with:
    output:
        test=f"{R}/data/{{dataset}}/test.safetensors",
    wildcard_constraints:
        dataset=TEST_ONLY,


# a partition job writes the partition and its label histogram (one process, not two)
rule partition:
    """Split a prepared dataset over the clients with a partition scheme; write the partition and
    its label histogram."""
    input:
        unpack(partition_inputs),
    output:
        json=f"{R}/partitions/{{pid}}.json",
        png=f"{R}/partitions/{{pid}}.png",
        pdf=f"{R}/partitions/{{pid}}.pdf",
    log:
        f"{R}/logs/partition/{{pid}}.log",
    benchmark:
        f"{R}/benchmarks/partition/{{pid}}.tsv"
    conda:
        ENV
    resources:
        **resources("partition"),
    params:
        command=job_command("partition.py"),
        spec=lambda wildcards: json.dumps(PLAN.partitions[wildcards.pid]),
        figure=lambda wildcards: json.dumps(partition_manifest(wildcards)),
    shell:
        "{params.command} --spec-json {params.spec:q} --train {input.train}"
        " --test {input.test} --out {output.json} --figure-json {params.figure:q}"
        " > {log} 2>&1"

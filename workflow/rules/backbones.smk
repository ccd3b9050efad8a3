rule pretrain_backbone:
    """Pretrain a tiny sibling of a paper backbone on the synthetic source set (mini scale)."""
    input:
        unpack(pretrain_inputs),
    output:
        f"{R}/backbones/pretrained/{{backbone}}.safetensors",
    log:
        f"{R}/logs/backbones/{{backbone}}.log",
    benchmark:
        f"{R}/benchmarks/backbones/{{backbone}}.tsv"
    conda:
        ENV
    threads: 1
    resources:
        **resources("pretrain"),
        gpu=config["gpus_per_train"],
    params:
        command=job_command("pretrain_backbone.py"),
        spec=lambda wildcards: json.dumps(PLAN.backbones[wildcards.backbone]),
        device=DEVICE,
    shell:
        "{params.command} --backbone {wildcards.backbone}"
        " --spec-json {params.spec:q} --data-dir $(dirname {input.train}) --out {output}"
        " --device {params.device} --threads {threads} > {log} 2>&1"


rule fetch_backbone:
    """Fetch a paper backbone's pretrained weights and check their digest (paper scale, local:
    needs the network)."""
    output:
        f"{R}/backbones/fetched/{{backbone}}.safetensors",
    log:
        f"{R}/logs/backbones/{{backbone}}.log",
    retries: 2
    localrule: True
    conda:
        ENV
    params:
        command=job_command("fetch_backbone.py"),
        root=DATA_ROOT,
        random=FETCH_FLAGS,
    shell:
        "{params.command} {wildcards.backbone} {output} --data-root {params.root}"
        " {params.random} > {log} 2>&1"


rule probe_backbone:
    """Linear probe of a pretrained tiny backbone on the analogs its runs use: how well its
    features transfer."""
    input:
        unpack(probe_inputs),
    output:
        f"{R}/backbones/probe/{{backbone}}.json",
    log:
        f"{R}/logs/backbones/probe-{{backbone}}.log",
    benchmark:
        f"{R}/benchmarks/probe/{{backbone}}.tsv"
    conda:
        ENV
    threads: 1
    resources:
        **resources("pretrain"),
    params:
        command=job_command("probe_backbone.py"),
        data=probe_dirs,
        device=DEVICE,
    shell:
        "{params.command} --backbone {wildcards.backbone} --weights {input.weights}"
        " --data {params.data:q} --out {output} --device {params.device}"
        " --threads {threads} > {log} 2>&1"


rule probe_table:
    """The linear-probe table of every pretrained tiny backbone (mini scale)."""
    input:
        [f"{R}/backbones/probe/{b}.json" for b in sorted(PLAN.probes)],
    output:
        md=f"{R}/tables/backbones/probe.md",
        csv=f"{R}/tables/backbones/probe.csv",
        tex=f"{R}/tables/backbones/probe.tex",
        html=report(
            f"{R}/tables/backbones/probe.html",
            caption="../../report/probe.rst",
            category="Backbones",
        ),
    log:
        f"{R}/logs/backbones/probe-table.log",
    localrule: True
    conda:
        ENV
    script:
        "../scripts/probe_table.py"

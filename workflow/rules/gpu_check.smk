# The GPU check (config/gpu_check.yaml; docs/gpu.md): the paper-shape smoke with every job
# under the discipline's checks, each chosen training and adaptation job run a second time
# and compared file by file, one training job killed after its first round and resumed, and
# each chosen run family's step timed at the paper's batch; `snakemake gpu_check` writes the
# page results/<scale>/gpu_check.md and the step times' table beside it.
C = f"{R}/{CHECK}"
CHECKED = checked(PLAN, WORK, GPU_CHECK)


rule gpu_check:
    """A target: the GPU check's page (every check of the smoke's jobs on this machine's
    device) and the measured step times the cost model reads."""
    input:
        unpack(gpu_check_inputs),
    output:
        page=f"{R}/gpu_check.md",
        steps=f"{C}/step_times.csv",
        summary=f"{C}/summary.json",
    log:
        f"{R}/logs/gpu_check/page.log",
    localrule: True
    conda:
        ENV
    params:
        root=lambda wildcards, output: os.path.dirname(output.page),
        jobs=gpu_check_jobs,
        settings=GPU_CHECK,
    script:
        "../scripts/gpu_check_page.py"


rule calibrate:
    """A target: each run family's step timed at the paper's batch on this cluster's GPUs (one
    short job a family, the smoke's data at the paper's shapes), the table the cost model and
    the Slurm requests read where config/paper.yaml's resources.gpu.calibration names it."""
    input:
        steps=[f"{C}/steps/{rid}.json" for rid in CHECKED["steps"]],
    output:
        f"{C}/calibration.csv",
    log:
        f"{R}/logs/gpu_check/calibration.log",
    localrule: True
    conda:
        ENV
    params:
        jobs=gpu_check_jobs,
    script:
        "../scripts/calibrate.py"


rule gpu_check_repeat_train:
    """Train the runs of a training job again and compare every file with the first's."""
    input:
        unpack(train_inputs),
        first=f"{R}/runs/{{batch}}.json",
    output:
        f"{C}/repeat/runs/{{batch}}.json",
    log:
        f"{R}/logs/gpu_check/repeat/runs/{{batch}}.log",
    conda:
        ENV
    threads: config["threads"]
    resources:
        **resources("train", "batch"),
        gpu=config["gpus_per_train"],
    params:
        command=job_command("gpu_check.py"),
        members=train_runs,
        root=lambda wildcards, output: os.path.dirname(output[0]),
        backbone=backbone_arg,
        device=DEVICE,
    shell:
        "{params.command} repeat --stage train --members-json {params.members:q}"
        " --root {params.root} --out {output} --data-dir $(dirname {input.train})"
        " {params.backbone} --device {params.device} --threads {threads} > {log} 2>&1"


rule gpu_check_repeat_adapt:
    """Adapt the runs of an adaptation job again and compare every file with the first's."""
    input:
        unpack(adapt_inputs),
        first=f"{R}/adapt/{{adapt}}.json",
    output:
        f"{C}/repeat/adapt/{{adapt}}.json",
    log:
        f"{R}/logs/gpu_check/repeat/adapt/{{adapt}}.log",
    conda:
        ENV
    threads: config["threads"]
    resources:
        **resources("adapt", "adapt"),
        gpu=config["gpus_per_train"],
    params:
        command=job_command("gpu_check.py"),
        members=adapt_runs,
        root=lambda wildcards, output: os.path.dirname(output[0]),
        backbone=backbone_arg,
        device=DEVICE,
    shell:
        "{params.command} repeat --stage adapt --members-json {params.members:q}"
        " --root {params.root} --out {output} --data-dir $(dirname {input.train})"
        " {params.backbone} --device {params.device} --threads {threads} > {log} 2>&1"


rule gpu_check_resume:
    """Train a training job's first run for two rounds through, and again killed after its
    first round's checkpoint and resumed; compare the two."""
    input:
        unpack(resume_inputs),
    output:
        f"{C}/resume.json",
    log:
        f"{R}/logs/gpu_check/resume.log",
    conda:
        ENV
    threads: config["threads"]
    resources:
        **resources("bench"),
        gpu=config["gpus_per_train"],
    params:
        command=job_command("gpu_check.py"),
        member=resume_member,
        train=cli_script("train.py"),
        root=lambda wildcards, output: os.path.splitext(output[0])[0],
        backbone=backbone_arg,
        device=DEVICE,
    shell:
        "{params.command} resume --members-json {params.member:q} --train {params.train}"
        " --root {params.root} --out {output} --data-dir $(dirname {input.train})"
        " {params.backbone} --device {params.device} --threads {threads} > {log} 2>&1"


rule gpu_check_step:
    """Time a run family's training step at the paper's batch; its peak device memory
    against the meta-device estimate."""
    input:
        unpack(step_inputs),
    output:
        f"{C}/steps/{{run}}.json",
    log:
        f"{R}/logs/gpu_check/steps/{{run}}.log",
    conda:
        ENV
    threads: config["threads"]
    resources:
        **resources("bench"),
        gpu=config["gpus_per_train"],
    params:
        command=job_command("gpu_check.py"),
        member=step_member,
        timing=json.dumps(GPU_CHECK.get("step_time", {})),
        backbone=backbone_arg,
        device=DEVICE,
    shell:
        "{params.command} steps --members-json {params.member:q} --timing {params.timing:q}"
        " --out {output} --data-dir $(dirname {input.train})"
        " {params.backbone} --device {params.device} --threads {threads} > {log} 2>&1"

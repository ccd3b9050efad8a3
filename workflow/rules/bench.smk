# `snakemake bench`: speed, memory, scaling and paper cost, measured on this machine.
# A timed engine job takes every core, so nothing else runs beside it; its priority starts
# it while every core is free (first, in the default), not after the last training job,
# where it would leave cores idle. The DAG build is one Python process, as Snakemake's own.
rule bench_workload:
    """Time one engine workload on this machine: samples/s, FLOP/s against the machine's matmul
    rate, overhead, peak memory."""
    output:
        f"{B}/workloads/{{workload}}.json",
    log:
        f"{B}/logs/{{workload}}.log",
    benchmark:
        f"{B}/benchmarks/workloads/{{workload}}.tsv"
    wildcard_constraints:
        workload="|".join(BENCH["workloads"]),
    priority: 10
    conda:
        ENV
    threads: bench_threads
    resources:
        **resources("bench"),
        gpu=bench_gpus,
    params:
        script=cli_script("bench.py"),
        spec=bench_spec,
    shell:
        "python {params.script} workload --spec-json {params.spec:q}"
        " --threads {threads} --out {output} > {log} 2>&1"


rule bench_clients:
    """Round time as the number of clients grows, on this machine."""
    output:
        f"{B}/clients.json",
    log:
        f"{B}/logs/clients.log",
    benchmark:
        f"{B}/benchmarks/clients.tsv"
    priority: 10
    conda:
        ENV
    threads: bench_threads
    resources:
        **resources("bench"),
    params:
        script=cli_script("bench.py"),
        spec=json.dumps(BENCH["clients"]),
    shell:
        "python {params.script} clients --spec-json {params.spec:q}"
        " --threads {threads} --out {output} > {log} 2>&1"


rule bench_dag:
    """Time `snakemake -n` of the paper-scale targets (the DAG's build time)."""
    output:
        f"{B}/dag.json",
    log:
        f"{B}/logs/dag.log",
    benchmark:
        f"{B}/benchmarks/dag.tsv"
    conda:
        ENV
    threads: 1
    resources:
        **resources("bench"),
    params:
        script=cli_script("bench.py"),
        spec=json.dumps(BENCH["dag"]),
    shell:
        "python {params.script} dag --spec-json {params.spec:q}" " --out {output} > {log} 2>&1"


# counted FLOPs at a GPU workload's measured rate: waits for the GPU-shape workloads only
rule bench_cost:
    """The paper scale's GPU-hours per paper and per item, from counted FLOPs and the run table."""
    input:
        [f"{B}/workloads/{w}.json" for w in gpu_workloads()],
    output:
        f"{B}/cost.json",
    log:
        f"{B}/logs/cost.log",
    benchmark:
        f"{B}/benchmarks/cost.tsv"
    conda:
        ENV
    resources:
        **resources("bench"),
    params:
        script=cli_script("bench.py"),
        spec=json.dumps(BENCH["cost"]),
    shell:
        "python {params.script} cost --spec-json {params.spec:q}"
        " --inputs {input} --out {output} > {log} 2>&1"


rule bench_page:
    """The benchmarks' summary page and figures (results/bench/)."""
    input:
        bench_page_inputs()[1],
    output:
        md=f"{B}/summary.md",
        html=report(f"{B}/summary.html", caption="../../report/bench.rst", category="Benchmarks"),
        figures=[
            report(
                f"{B}/{n}.png",
                caption="../../report/bench.rst",
                category="Benchmarks",
                labels={"figure": n},
            )
            for n in BENCH_PAGE
        ],
        pdfs=[f"{B}/{n}.pdf" for n in BENCH_PAGE],
    log:
        f"{B}/logs/page.log",
    benchmark:
        f"{B}/benchmarks/page.tsv"
    conda:
        ENV
    resources:
        **resources("bench"),
    params:
        script=cli_script("bench.py"),
        spec=json.dumps(
            {
                "names": bench_page_inputs()[0],
                "engine": BENCH["engine"],
                "memory": "memory",
                "rounds": "rounds",
                "goals": BENCH["goals"],
            }
        ),
    shell:
        "python {params.script} page --spec-json {params.spec:q}"
        " --inputs {input} --out {output.md} > {log} 2>&1"


# the embedded default's time per paper: after every other job of the default (`all` at
# mini scale, the benchmark jobs included, or `snakemake bench_budget`, which runs what of
# the default is missing)
rule bench_budget:
    """The embedded default's wall time per paper against its budget, from the jobs' own records."""
    input:
        default_outputs(),
        rules.bench_page.output if SCALE == "mini" else [],
        notes=method_notes(),
    output:
        json=f"{B}/budget.json",
        md=f"{B}/budget.md",
        html=report(f"{B}/budget.html", caption="../../report/bench.rst", category="Benchmarks"),
    log:
        f"{B}/logs/budget.log",
    conda:
        ENV
    resources:
        **resources("bench"),
    params:
        script=cli_script("bench.py"),
        spec=json.dumps(
            {
                "root": R,
                "bench": f"{B}/benchmarks",
                "cores": local_cores(),
                "limits": BENCH["budget"],
                "docs": METHOD_NOTES,
            },
        ),
    shell:
        "python {params.script} budget --spec-json {params.spec:q} --out {output.json} > {log} 2>&1"


rule bench:
    """Every benchmark of the engine on this machine (`snakemake bench`)."""
    input:
        rules.bench_page.output,
    localrule: True

# fedrepro: regenerate the tables and figures of five federated-learning papers.
#   snakemake --cores all                               embedded default (mini, offline)
#   snakemake --profile profiles/slurm --configfile config/paper.yaml   paper scale
#   snakemake --report results/report.html              HTML report
from snakemake.utils import min_version, validate

min_version("9.0")


configfile: "config/config.yaml"


report: "report/workflow.rst"


include: "workflow/rules/common.smk"
include: "workflow/rules/bench.smk"


# local jobs run as forks of one process that has imported torch (config `forkserver`); a
# cluster job runs in its own allocation, never on a server beside the driver
onstart:
    mark_driver()  # the jobs' view of this process (bench budget)
    if config.get("forkserver", False) and workflow.local_exec:
        FORKSERVER.start()


onsuccess:
    FORKSERVER.stop()
    cancel_wakeups()  # the rate limiter's timers would hold the exit up to a minute


onerror:
    FORKSERVER.stop()
    cancel_wakeups()


# `snakemake bench` is its own target; at mini scale `all` includes it (the report's
# benchmark page) and the default's time budget (`bench_budget`, after every other job), at
# paper scale both stay out of the cluster run.
rule all:
    """Every paper's tables, figures and claims at the configured scale (at mini also the
    benchmarks and the time budget)."""
    default_target: True
    input:
        default_outputs(),
        f"{R}/overview.html",  # the report's first page (the overview rule)
        rules.bench.input if SCALE == "mini" else [],
        rules.bench_budget.output if SCALE == "mini" else [],
    localrule: True


include: "workflow/rules/data.smk"
include: "workflow/rules/backbones.smk"
include: "workflow/rules/train.smk"
include: "workflow/rules/items.smk"
include: "workflow/rules/targets.smk"


if GPU_CHECK:  # config/gpu_check.yaml

    include: "workflow/rules/gpu_check.smk"

# The run table is computed once, here; input functions only look things up in it.
import json
import os
from pathlib import Path
from types import SimpleNamespace

from fedrepro.bench.driver import cancel_wakeups, mark_driver
from fedrepro.bench.gpu_check_plan import CHECK, DISCIPLINE, checked
from fedrepro.cost.work import (
    WorkTable,
    calibration_of,
    job_resources,
    job_retries,
    known_sizes,
    pack_small_jobs,
    partition_limit,
)
from fedrepro.data.sources.registry import DATASETS, raw_sources
from fedrepro.experiments.config import SCHEMA_DIR, ConfigError
from fedrepro.experiments.items import ITEM_KINDS
from fedrepro.experiments.plan import build_plan, public_dataset, shift_dataset
from fedrepro.jobs.forkserver import ForkServer
from fedrepro.report.results import result_files
from fedrepro.report.specs import check_specs
from fedrepro.report.tables import report_caption

try:  # validates the config first: a bad value stops here with one line naming the key
    PLAN = build_plan(config, Path(workflow.basedir))
    check_specs(PLAN, Path(workflow.basedir))  # items and claims, before any job
except ConfigError as err:
    raise SystemExit(f"fedrepro config error: {err}")

# fills the schema's defaults; the schemas ship with the library (package data)
validate(config, str(SCHEMA_DIR / "config.yaml"))

SCALE = config["scale"]
R = PLAN.root  # results/<scale>
DATA_ROOT = config["data_root"]
ENV = "../../envs/fedrepro.yaml"


def cli_script(name):
    """A command-line script of the rules that keep `shell:` (the torch jobs run in the job's
    own Python, not the driver's): found from the workflow, written relative to the working
    directory so that a moved checkout does not rerun everything."""
    return os.path.relpath(f"{workflow.basedir}/workflow/scripts/{name}")


GPU_CHECK = config.get("gpu_check")  # the GPU check's settings (config/gpu_check.yaml)


def job_command(name):
    """The command of a job script: the fork server's client, which runs the script on
    the server when one is up (config `forkserver`, local runs) and as the plain
    `python SCRIPT` otherwise (fedrepro.jobs.forkserver). Under the GPU check every job
    writes its discipline report (fedrepro.discipline) into results/<scale>/discipline/."""
    checked = f"{DISCIPLINE}={R}/discipline " if GPU_CHECK else ""
    return f"{checked}python -m fedrepro.jobs.forkserver {cli_script(name)}"


DEVICE = config["device"]
# the smoke stands random weights in for a backbone with none staged (nothing downloads)
FETCH_FLAGS = "--random" if (PLAN.smoke or {}).get("weights") == "random" else ""
FORKSERVER = ForkServer()


# Datasets with only a test split (CIFAR-10-C, CIFAR-10.1) get their own prepare rule.
TEST_ONLY = "|".join(n for n, d in DATASETS.items() if tuple(d.splits) == ("test",))
TRAIN_TEST = "|".join(n for n, d in DATASETS.items() if tuple(d.splits) != ("test",))


wildcard_constraints:
    dataset=r"[a-z0-9_]+",
    run=r"[A-Za-z0-9_.\-]+",
    batch=r"[A-Za-z0-9_.\-]+",
    adapt=r"[A-Za-z0-9_.\-]+",
    structure=r"[A-Za-z0-9_.\-]+",
    pid=r"[A-Za-z0-9_.\-]+",
    backbone=r"[A-Za-z0-9_.\-]+",
    # the planned papers only: the probe table (tables/backbones/probe.*) has its own rule
    paper="|".join(sorted(PLAN.papers)) or r"[a-z0-9_]+",
    item=r"[A-Za-z0-9_]+",


# per-sample FLOPs and sample counts of the scale's plan (committed; bench.py work writes it)
WORK = WorkTable(
    Path(workflow.basedir) / "config" / "flops" / f"{config['scale']}.json",
    known_sizes(config["bench"]["cost"]["split_sizes"]),
    calibration_of(PLAN.scale_cfg, Path(workflow.basedir)),  # `snakemake calibrate`'s
)
pack_small_jobs(PLAN, WORK)  # small training jobs share an allocation (resources.pack)


# the time limit of the Slurm partitions a training or adaptation job goes to (config
# `partitions`), and the retries it allows to finish through resumptions under it, plus one
# for a failure (profiles/slurm's `retries: 1`; the command line's is not known while the
# workflow parses); None: the command line's
LIMIT = partition_limit(
    Path(workflow.basedir) / config["partitions"], int(config["gpus_per_train"])
)
RETRIES = {stage: job_retries(PLAN, WORK, stage, LIMIT, 1) for stage in ("train", "adapt")}


def resources(stage, key=None):
    """`mem_mb` and `runtime` of a job, from the plan (a training or adaptation job's runtime:
    its work on the scale's GPU, fedrepro.cost.work), scaled by the Slurm attempt; under the
    partitions' limit, a longer job asks the limit on each attempt it resumes."""

    def get(name):
        return lambda wc, attempt: job_resources(
            PLAN, WORK, stage, key and wc[key], attempt, LIMIT
        )[name]

    return {"mem_mb": get("mem_mb"), "runtime": get("runtime")}


def raw_inputs(wildcards):
    """Paper scale parses downloaded files (a composite such as `digits`: those of its
    components, never a download of its own); mini scale synthesizes from nothing."""
    if PLAN.synthetic:
        return []
    return [f"{DATA_ROOT}/{d}/.fetched" for d in raw_sources(wildcards.dataset)]


def prepare_scale(wildcards):
    """`mini` (synthesize) where the plan's data is synthetic (mini scale, the smoke)."""
    return "mini" if PLAN.synthetic else SCALE


def data_root_of(wildcards, output):
    """`data_root` recovered from a `<data_root>/<dataset>/.fetched` flag."""
    return str(Path(output[0]).parents[1])


def data_args(wildcards):
    d = PLAN.datasets.get(wildcards.dataset) or config["scales"][SCALE].get("data", {})
    names = {"per_class_train": "--per-class-train", "per_class_test": "--per-class-test"}
    names |= {"size": "--size", "seed": "--seed"}
    return " ".join(f"{flag} {int(d[k])}" for k, flag in names.items() if k in d)


def split_files(dataset):
    return {s: f"{R}/data/{dataset}/{s}.safetensors" for s in ("train", "test")}


def backbone_file(name):
    mode = PLAN.backbones[name]["mode"]
    return f"{R}/backbones/{'pretrained' if mode == 'pretrain' else 'fetched'}/{name}.safetensors"


def partition_inputs(wildcards):
    return split_files(PLAN.partitions[wildcards.pid]["dataset"])


def shift_inputs(shift):
    """The other dataset's test split that a `kind: dataset` test-time shift reads."""
    name = shift_dataset(shift)
    return {} if name is None else {"shift_test": split_files(name)["test"]}


def public_inputs(run):
    """The training split of the public data set a run's algorithm reads (FedMD)."""
    name = public_dataset(run)
    return {} if name is None else {"public_train": split_files(name)["train"]}


def partition_file(run):
    return f"{R}/partitions/{run['partition_id']}.json"


def run_inputs(run):
    files = split_files(run["dataset"]) | shift_inputs(run.get("test_shift"))
    files |= public_inputs(run)
    files["partition"] = partition_file(run)
    if run["model"].get("pretrained", True):
        names = dict.fromkeys(run["model"].get("client_backbones") or [])
        many = len(names) > 1  # clients of different models: a file per backbone
        files["backbone"] = (
            [backbone_file(n) for n in names] if many else backbone_file(run["model"]["backbone"])
        )
    return files


def runs_inputs(rids):
    """The inputs of runs ``rids`` (the seeds of a job share data and backbone; each has its
    own partition unless the config fixes the partition's seed)."""
    files = [run_inputs(PLAN.runs[rid]) for rid in rids]
    merged = {k: v for f in files for k, v in f.items() if k != "partition"}
    return merged | {"partition": sorted({f["partition"] for f in files})}


def train_inputs(wildcards):
    return runs_inputs(PLAN.train_jobs[wildcards.batch])


def train_runs(wildcards):
    """The job's runs as the train script takes them: config, partition, output directory."""
    return json.dumps(
        [
            {
                "config": PLAN.runs[rid],
                "partition": partition_file(PLAN.runs[rid]),
                "out_dir": f"{R}/runs/{rid}",
            }
            for rid in PLAN.train_jobs[wildcards.batch]
        ],
        sort_keys=True,  # a config whose keys come in another order is the same config
    )


def adapt_inputs(wildcards):
    """The inputs of the adapted runs plus their training job's record (a run's saved state
    is its adaptation's starting point)."""
    members = [PLAN.adapts[aid] for aid in PLAN.adapt_jobs[wildcards.adapt]]
    files = runs_inputs([a["run"] for a in members])
    files |= shift_inputs(members[0]["adapt"].get("shift"))  # one adaptation a job
    return files | {"trained": sorted({PLAN.trained(a["run"]) for a in members})}


def adapt_runs(wildcards):
    """The job's adaptations as the adapt script takes them."""
    members = [(aid, PLAN.adapts[aid]) for aid in PLAN.adapt_jobs[wildcards.adapt]]
    return json.dumps(
        [
            {
                "adapt": a["adapt"],
                "run_dir": f"{R}/runs/{a['run']}",
                "partition": partition_file(PLAN.runs[a["run"]]),
                "out_dir": f"{R}/adapt/{aid}",
            }
            for aid, a in members
        ],
        sort_keys=True,
    )


def backbone_arg(wildcards, input):
    return f"--backbone {input.backbone}" if "backbone" in input.keys() else ""


def pretrain_inputs(wildcards):
    files = split_files(PLAN.backbones[wildcards.backbone]["dataset"])
    return files


def probe_inputs(wildcards):
    """The pretrained weights and the train/test splits of every dataset its runs use."""
    datasets = PLAN.probes[wildcards.backbone]
    return {
        "weights": backbone_file(wildcards.backbone),
        "train": [split_files(d)["train"] for d in datasets],
        "test": [split_files(d)["test"] for d in datasets],
    }


def probe_dirs(wildcards):
    return [f"{R}/data/{d}" for d in PLAN.probes[wildcards.backbone]]


def item_inputs(wildcards):
    """Exactly the result files the item's manifest names (any stage), and the reported
    numbers it shows (an edited transcription rebuilds the items that show it)."""
    manifest = PLAN.items[f"{wildcards.paper}/{wildcards.item}"]
    reported = [manifest["reported"], manifest["spec"].get("reported")]
    return {"results": result_files(manifest), "reported": [p for p in reported if p]}


def claims_inputs(wildcards):
    """Every result file the claims read, and the paper's reported numbers."""
    manifests = claims_manifests(wildcards).values()
    reported = [PLAN.claims[wildcards.paper]["reported"]]
    reported += [m["spec"].get("reported") for m in manifests if m["kind"] == "parameters"]
    return {
        "results": sorted({f for m in manifests for f in result_files(m)}),
        "reported": sorted({p for p in reported if p}),
    }


def item_manifest(wildcards):
    return PLAN.items[f"{wildcards.paper}/{wildcards.item}"]


def claims_manifests(wildcards):
    return {i: PLAN.items[f"{wildcards.paper}/{i}"] for i in PLAN.papers[wildcards.paper]}


def partition_manifest(wildcards):
    """A one-partition figure item: every partition gets its label histogram."""
    part = PLAN.partitions[wildcards.pid]
    return {
        "paper": "partitions",
        "item": wildcards.pid,
        "kind": "figure",
        "title": f"{part['dataset']}: {part['spec']['scheme']}, {part['spec']['clients']} clients",
        "scale": SCALE,
        "spec": {"figure": "partition_hist"},
        "runs": [],
        "partitions": [
            {
                "id": wildcards.pid,
                "labels": {"seed": part["seed"]},
                "file": f"{R}/partitions/{wildcards.pid}.json",
            }
        ],
    }


def item_outputs(paper, item):
    kind = ITEM_KINDS[PLAN.items[f"{paper}/{item}"]["kind"]]
    return [f"{R}/{kind.folder}/{paper}/{item}.{ext}" for ext in kind.outputs]


def paper_outputs(paper):
    files = [f for item in PLAN.papers[paper] for f in item_outputs(paper, item)]
    return files + [f"{R}/claims/{paper}.html"]


def default_outputs():
    """What `all` builds besides the benchmarks: every paper's items and claims, every
    partition's figure, the linear-probe table."""
    files = [f for paper in PLAN.papers for f in paper_outputs(paper)]
    files += [f"{R}/partitions/{pid}.png" for pid in PLAN.partitions]
    return files + ([f"{R}/tables/backbones/probe.html"] if PLAN.probes else [])


# the report's first page (the overview rule, items.smk): every paper's items and claims
CONTENTS = "config/reported/contents.csv"  # the papers' own tables and figures, by hand


def overview_spec():
    """Per paper: its title, each item's kind, metric and csv (figures have none), its claims."""
    papers = {}
    for paper, items in PLAN.papers.items():
        entries = {}
        for item in items:
            manifest = PLAN.items[f"{paper}/{item}"]
            kind = ITEM_KINDS[manifest["kind"]]
            csv = f"{R}/{kind.folder}/{paper}/{item}.csv" if "csv" in kind.outputs else None
            entries[item] = {"kind": manifest["kind"], "metric": manifest["spec"].get("metric"),
                             "csv": csv}  # fmt: skip
        papers[paper] = {"title": PLAN.titles[paper], "items": entries,
                         "claims": f"{R}/claims/{paper}.csv"}  # fmt: skip
    return {"scale": SCALE, "papers": papers}


def overview_inputs():
    spec = overview_spec()["papers"]
    files = [e["csv"] for p in spec.values() for e in p["items"].values() if e["csv"]]
    return files + [p["claims"] for p in spec.values()]


# Each paper's method notes, where the reason of every claim the paper's numbers hold and ours
# do not is written (the budget page lists the ones they never name).
METHOD_NOTES = "docs/methods"


def method_notes():
    return [f"{METHOD_NOTES}/{paper}.md" for paper in PLAN.papers]


def item_text(wildcards, key):
    return PLAN.items[f"{wildcards.paper}/{wildcards.item}"][key]


def item_cells(wildcards):
    """What a table item's cells, their ± and their marks are (its report caption)."""
    item = PLAN.items[f"{wildcards.paper}/{wildcards.item}"]
    return report_caption(item["kind"], item["spec"])


# `snakemake bench` (workflow/rules/bench.smk)
B = f"{config['results']}/bench"
BENCH = config["bench"]
BENCH_PAGE = ["engine", "clients", "rounds", "dag", "cost"]


def bench_spec(wildcards):
    return json.dumps(BENCH["workloads"][wildcards.workload])


def local_cores():
    """The cores of a local run (`--cores`) as its driver reads them; None where Snakemake
    has no core count (a cluster run's driver: `workflow.cores` raises) or its count is not
    the run's (the Snakemake inside a cluster job)."""
    return workflow.resource_settings.cores if workflow.is_main_process else None


def bench_threads(wildcards):
    """A timed bench job takes every core of a local run (nothing runs beside it); a cluster
    job asks for config `bench.threads` CPUs."""
    return local_cores() or BENCH["threads"]


def bench_gpus(wildcards):
    return int(BENCH["workloads"][wildcards.workload].get("device") == "cuda")


def gpu_workloads():
    """The engine workloads of paper shape (run on a GPU, skipped without one)."""
    return [w for w in BENCH["engine"] if BENCH["workloads"][w].get("device") == "cuda"]


def bench_page_inputs():
    names = list(BENCH["workloads"]) + ["clients", "dag", "cost"]
    files = [f"{B}/workloads/{w}.json" for w in BENCH["workloads"]]
    return names, files + [f"{B}/{n}.json" for n in ("clients", "dag", "cost")]


def gpu_check_inputs(wildcards):
    """The smoke's outputs and every check's record (fedrepro.bench.gpu_check_plan)."""
    return {
        "smoke": default_outputs(),
        "repeat": [f"{C}/repeat/runs/{j}.json" for j in CHECKED["repeat_train"]]
        + [f"{C}/repeat/adapt/{j}.json" for j in CHECKED["repeat_adapt"]],
        "resume": [f"{C}/resume.json"] if CHECKED["resume"] else [],
        "steps": [f"{C}/steps/{rid}.json" for rid in CHECKED["steps"]],
    }


def gpu_check_jobs(wildcards):
    """Per checked run and adaptation: its run config, adapt block and paper batch (the page
    holds each discipline report against what its job may wait for)."""
    runs = {rid: {"run": run, "batch": PLAN.paper_batch.get(rid)} for rid, run in PLAN.runs.items()}
    adapts = {
        aid: {"run": PLAN.runs[a["run"]], "adapt": a["adapt"]} for aid, a in PLAN.adapts.items()
    }
    return {"runs": runs, "adapts": adapts}


def resume_inputs(wildcards):
    return train_inputs(SimpleNamespace(batch=CHECKED["resume"]))


def resume_member(wildcards):
    """The first run of the check's resumed training job (the train script's member)."""
    return json.dumps(json.loads(train_runs(SimpleNamespace(batch=CHECKED["resume"])))[:1])


def step_inputs(wildcards):
    return runs_inputs([wildcards.run])


def step_member(wildcards):
    """The timed run family's run at its paper batch (the check's member)."""
    run = PLAN.runs[wildcards.run]
    member = {
        "config": run,
        "partition": partition_file(run),
        "out_dir": f"{C}/steps/{wildcards.run}",
    }
    return json.dumps(
        [{**member, "batch": PLAN.paper_batch.get(wildcards.run, run["train"]["batch_size"])}]
    )

"""Experiment files → the typed stages of the DAG and the item manifests that read them.

Pure Python and computed once per Snakemake invocation. Stages, each keyed by a readable
prefix plus a hash of what determines its output:

- ``runs`` (train): the fully resolved run config. Same config ⇒ same id ⇒ the run is
  trained once, whichever tables need it.
- ``adapts`` (adapt): the trained run's id plus the adaptation block, so changing an
  adaptation option reruns only the adaptation's job (and what reads it), not training.
- ``structures`` (structure): the architecture spec that is counted.

An item manifest names the exact result file of each stage it reads (``files`` of each
run entry, ``file`` of each partition, ``structure.file``); the report reads only those.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
from dataclasses import dataclass, field
from pathlib import Path

from fedrepro.data.sources.registry import get_dataset, image_count
from fedrepro.experiments.checks import (
    check_model,
    check_options,
    check_overrides,
    check_transcriptions,
    check_where,
    experiment_file,
)
from fedrepro.experiments.checks import selected as _selected
from fedrepro.experiments.config import ConfigError, deep_merge, load_yaml, validate
from fedrepro.experiments.extend import check_set_used, outside_methods, with_methods, with_set
from fedrepro.experiments.items import ITEM_KINDS, structure_quantities
from fedrepro.experiments.options import algorithm_options, server_model_names
from fedrepro.experiments.smoke import cover, smoke_adapt, smoke_run

NOT_HASHED = ("paper",)


def digest(obj, n: int = 10) -> str:
    return hashlib.sha1(json.dumps(obj, sort_keys=True).encode()).hexdigest()[:n]


def group_id(run: dict) -> str:
    """The configuration a run replicates: ``<algorithm>-<dataset>-<hash>``, the hash over the
    resolved config without the replicate (its seed and what the seed picks: the partition
    drawn with it, the fold it names), so the seeds of one configuration share it."""
    body = {k: v for k, v in run.items() if k not in (*NOT_HASHED, "seed", "partition_id")}
    if body.get("cv", {}).get("fold") == run["seed"]:  # the fold the replicate picks
        body["cv"] = {k: v for k, v in body["cv"].items() if k != "fold"}
    return f"{run['algorithm']['name']}-{run['dataset']}-{digest(body)}"


def run_id(run: dict) -> str:
    """``<group>-s<seed>``: the configuration and the replicate (the full config is recoverable
    from the two, so equal ids mean equal runs)."""
    return f"{group_id(run)}-s{run['seed']}"


def adapt_id(run: str, adapt: dict) -> str:
    return f"{adapt['method']}-{run}-{digest({'run': run, 'adapt': adapt}, 8)}"


def structure_id(spec: dict) -> str:
    return f"{spec['kind']}-{spec['backbone']}-{digest(spec)}"


# where each stage writes the result files items read (relative to results/<scale>)
STAGE_FILES = {
    "train": {
        "metrics": "runs/{id}/metrics.json",
        "history": "runs/{id}/history.csv",
        "state": "runs/{id}/state.safetensors",
        "config": "runs/{id}/config.json",
    },
    "adapt": {"metrics": "adapt/{id}/metrics.json", "history": "adapt/{id}/history.csv"},
}


@dataclass
class Plan:
    """Everything the workflow needs to wire jobs, keyed by content-derived ids."""

    scale: str
    root: str = "results/mini"  # results/<scale>: every path in a manifest starts here
    scale_cfg: dict = field(default_factory=dict)  # config["scales"][scale]
    runs: dict[str, dict] = field(default_factory=dict)
    # training jobs: job id -> its runs (the seeds of one configuration, or one run a job:
    # config ``runs_per_job``); each run's directory, checkpoint and metrics are its own
    train_jobs: dict[str, list[str]] = field(default_factory=dict)
    job_of: dict[str, str] = field(default_factory=dict)  # run id -> its training job
    runs_per_job: str = "seeds"
    adapts: dict[str, dict] = field(default_factory=dict)  # id -> {run, adapt}
    # adaptation jobs: the same adaptation of the runs of one training job, in turn
    adapt_jobs: dict[str, list[str]] = field(default_factory=dict)
    adapt_job_of: dict[str, str] = field(default_factory=dict)  # adaptation -> its job
    # training and adaptation jobs that are packs of small jobs (``regroup``)
    packs: set[str] = field(default_factory=set)
    structures: dict[str, dict] = field(default_factory=dict)  # id -> spec
    partitions: dict[str, dict] = field(default_factory=dict)
    datasets: dict[str, dict] = field(default_factory=dict)
    # config bench.cost.split_sizes: the image counts the registry does not publish (the data
    # jobs' memory is sized by their images)
    assumed_sizes: dict = field(default_factory=dict)
    backbones: dict[str, dict] = field(default_factory=dict)
    probes: dict[str, list[str]] = field(default_factory=dict)  # pretrained -> its datasets
    items: dict[str, dict] = field(default_factory=dict)  # "<paper>/<item>" -> manifest
    papers: dict[str, list[str]] = field(default_factory=dict)  # paper -> item names
    claims: dict[str, dict] = field(default_factory=dict)  # paper -> claims manifest
    titles: dict[str, str] = field(default_factory=dict)  # paper -> its title (the report)
    # the paper-shape smoke (config ``smoke``, fedrepro.experiments.smoke): its settings, and
    # the (algorithm, backbone, tuning, adaptation) combinations its runs cover
    smoke: dict | None = None
    covered: list[tuple] = field(default_factory=list)
    # a smoke run's paper-scale client count (structural items count the paper's clients)
    paper_clients: dict[str, int] = field(default_factory=dict)
    # ... and its paper-scale batch (the GPU check times a step of each run family at it)
    paper_batch: dict[str, int] = field(default_factory=dict)

    @property
    def synthetic(self) -> bool:
        """Whether datasets are synthesized (mini scale, the smoke), not parsed from raw files."""
        return self.scale == "mini" or bool(self.smoke)

    def path(self, relative: str) -> str:
        return f"{self.root}/{relative}"

    def add_run(self, run: dict) -> str:
        """Register a resolved run (once, whichever items need it) in its training job."""
        rid = run_id(run)
        if rid not in self.runs:
            self.runs[rid] = run
            job = group_id(run) if self.runs_per_job == "seeds" else rid
            self.job_of[rid] = job
            members = self.train_jobs.setdefault(job, [])
            members.append(rid)
            members.sort(key=lambda r: self.runs[r]["seed"])
        return rid

    def add_adapt(self, rid: str, adapt: dict) -> str:
        """Register adaptation ``adapt`` of run ``rid`` in its job: the same adaptation of
        every run of ``rid``'s training job (that job's id in place of the run's)."""
        aid = adapt_id(rid, adapt)
        if aid not in self.adapts:
            self.adapts[aid] = {"run": rid, "adapt": adapt}
            job = adapt_id(self.job_of[rid], adapt)  # = aid where a run is its own job
            self.adapt_job_of[aid] = job
            members = self.adapt_jobs.setdefault(job, [])
            members.append(aid)
            members.sort(key=lambda a: self.runs[self.adapts[a]["run"]]["seed"])
        return aid

    def regroup(self, jobs: dict[str, list[str]]) -> None:
        """Make each of ``jobs`` (a new job id -> the training jobs it takes in) one training
        job of their runs, one after another (a pack: ``fedrepro.cost.work.pack_small_jobs``),
        and each adaptation job follow its runs' new job; a pack asks its stage's least
        runtime once (``resources``), not once a member."""
        for new, old in jobs.items():
            runs = [r for job in old for r in self.train_jobs.pop(job)]
            self.train_jobs[new] = runs
            self.job_of.update(dict.fromkeys(runs, new))
            self.packs.add(new)
        self.adapt_jobs, self.adapt_job_of = {}, {}
        for aid, entry in self.adapts.items():
            job = adapt_id(self.job_of[entry["run"]], entry["adapt"])
            self.adapt_job_of[aid] = job
            self.adapt_jobs.setdefault(job, []).append(aid)
            if self.job_of[entry["run"]] in self.packs:
                self.packs.add(job)
        for members in self.adapt_jobs.values():
            members.sort(key=lambda a: self.runs[self.adapts[a]["run"]]["seed"])
        for manifest in self.items.values():  # the records their files are built by
            manifest["runs"] = [_with_files(self, e, e["files"]) for e in manifest["runs"]]

    def trained(self, rid: str) -> str:
        """The file whose existence says run ``rid`` is trained: its training job's record."""
        return self.path(f"runs/{self.job_of[rid]}.json")

    def adapted(self, aid: str) -> str:
        """The file whose existence says adaptation ``aid`` is done: its job's record."""
        return self.path(f"adapt/{self.adapt_job_of[aid]}.json")

    def resources(self, stage: str, key: str | None = None, attempt: int = 1) -> dict:
        """``mem_mb`` and the least ``runtime`` of a job of ``stage`` (its training job or adapt
        id as ``key``: ``min_minutes`` a member, run in turn), scaled by the Slurm attempt
        number. The workflow asks ``fedrepro.cost.work.job_resources``, which adds the time a
        training or adaptation job's work takes on the scale's GPU."""
        if stage == "data":  # a preparing job holds its images about 3x over: sized by them
            job = job_resources(self.scale_cfg, stage)
            mem = job["mem_mb"] + (self.prepared_mb(key) if key else 0)
            return {"mem_mb": mem * attempt, "runtime": job["runtime"] * attempt}
        each = job_resources(self.scale_cfg, stage)
        members = {"train": self.train_jobs, "adapt": self.adapt_jobs}.get(stage)
        n = len(members[key]) if members is not None and key not in self.packs else 1
        return {"mem_mb": each["mem_mb"] * attempt, "runtime": each["runtime"] * n * attempt}

    def prepared_mb(self, dataset: str) -> int:
        """Memory (MB) the job preparing ``dataset`` needs beyond ``resources.data.mem_mb``:
        the scale's ``mb_per_prepared_mb`` (none at mini) times the megabytes of its prepared
        images, counted at the prepared side from the registry's published counts or the
        config's assumed ones (``bench.cost.split_sizes``)."""
        factor = self.scale_cfg.get("resources", {}).get("data", {}).get("mb_per_prepared_mb")
        if not factor:
            return 0
        return math.ceil(float(factor) * self.stored_mb(dataset))

    def stored_mb(self, dataset: str) -> float:
        """MiB of ``dataset``'s prepared images (uint8, every split, at the prepared side: what
        a run keeps on its device), from the registry's published counts or the config's
        assumed ones (``bench.cost.split_sizes``)."""
        count = image_count(dataset, self.assumed_sizes)
        if count is None:
            raise ConfigError(
                f"bench.cost.split_sizes: no image count for dataset {dataset!r} (nor in the "
                "registry): the memory of the job preparing it cannot be sized"
            )
        spec = get_dataset(dataset)
        side = int(_data_of(self.scale_cfg, dataset).get("size") or spec.image_size)
        return count * side * side * spec.channels / 2**20


def build_plan(config: dict, repo: Path) -> Plan:
    """Expand every paper listed in `config["papers"]` at `config["scale"]`."""
    validate(config, "config", "config")
    scale = config["scale"]
    if scale not in config["scales"]:
        hint = " (use --configfile config/paper.yaml)" if scale == "paper" else ""
        raise ConfigError(f"config.scales.{scale}: no settings for scale {scale!r}{hint}")
    scale_cfg = config["scales"][scale]
    smoke = config.get("smoke")
    if smoke:  # synthetic data at each dataset's shape: the scale's data block sizes it
        over = {"data": smoke["data"], "datasets": smoke.get("datasets", {})}
        scale_cfg = deep_merge(scale_cfg, over)
    plan = Plan(scale=scale, root=f"{config['results']}/{scale}", scale_cfg=scale_cfg)
    plan.smoke = smoke or None
    plan.runs_per_job = config.get("runs_per_job", "seeds")
    plan.assumed_sizes = config.get("bench", {}).get("cost", {}).get("split_sizes", {})
    methods = outside_methods(config.get("methods", {}), Path.cwd())
    overrides, docs = config.get("set", []), {}
    for paper in config["papers"]:
        path = Path(repo) / "config" / "experiments" / f"{paper}.yaml"
        if not path.exists():
            raise ConfigError(f"config.papers: no experiment file {path}")
        doc = load_yaml(path)
        validate(doc, "experiment", f"experiments/{paper}")
        over = doc.get("scales", {}).get(scale, {})
        for section in ("grids", "axes"):  # a scale narrows what exists, never adds to it
            unknown = sorted(set(over.get(section, {})) - set(doc[section]))
            if unknown:
                raise ConfigError(
                    f"experiments/{paper} scales.{scale}.{section}: {unknown} not in {section}"
                )
        doc = deep_merge(doc, over)
        check_transcriptions(Path(repo), doc)
        check_overrides(paper, doc)
        docs[paper] = doc = with_set(paper, with_methods(paper, doc, methods), overrides)
        _expand_paper(plan, paper, doc, scale_cfg)
    check_set_used(overrides, docs)
    if plan.smoke:
        plan.covered = cover(plan)
    if config.get("eval_rounds", "read") == "read":
        _evaluate_where_read(plan)
    return plan


def paper_plan(repo: Path, papers: list[str] | None = None, **config) -> Plan:
    """The paper-scale plan: config/config.yaml with config/paper.yaml over it (as
    ``--configfile config/paper.yaml`` gives), the papers and other keys optionally set."""
    merged = deep_merge(
        load_yaml(repo / "config/config.yaml"), load_yaml(repo / "config/paper.yaml")
    )
    if papers:
        merged["papers"] = list(papers)
    return build_plan({**merged, **config}, repo)


def _grid_points(doc: dict, name: str):
    grid = {k: v for k, v in doc["grids"][name].items() if k != "seeds"}
    axes = list(grid)
    for a in axes:
        if a not in doc["axes"]:
            raise ConfigError(f"grids.{name}.{a}: unknown axis (allowed: {', '.join(doc['axes'])})")
    values = []
    for a in axes:
        chosen = list(doc["axes"][a]) if grid[a] == "all" else grid[a]
        for v in chosen:
            if v not in doc["axes"][a]:
                allowed = ", ".join(doc["axes"][a])
                raise ConfigError(f"grids.{name}.{a}: unknown value {v!r} (allowed: {allowed})")
        values.append(chosen)
    for combo in itertools.product(*values):
        yield dict(zip(axes, combo, strict=True))


def _expand_paper(plan: Plan, paper: str, doc: dict, scale_cfg: dict) -> None:
    grid_runs: dict[str, list[dict]] = {}
    for gname in doc["grids"]:
        grid_runs[gname] = []
        for labels in _grid_points(doc, gname):
            cfg = doc["defaults"]
            for axis, value in labels.items():
                cfg = deep_merge(cfg, doc["axes"][axis][value])
            for over in doc.get("overrides", []):  # settings of a combination of values
                if _selected(labels, over["where"]) and gname in over.get("grids", [gname]):
                    cfg = deep_merge(cfg, over["set"])
            adapt = cfg.pop("adapt", None)  # an adapt stage on top of the trained run
            if adapt is not None and plan.smoke:
                adapt = smoke_adapt(adapt, plan.smoke)
            if adapt is not None:
                validate(adapt, "adapt", f"experiments/{paper} grids.{gname} adapt")
                _register_dataset(plan, shift_dataset(adapt.get("shift")), scale_cfg)
            check_options(paper, doc, labels, cfg, adapt)  # what the schemas cannot see
            seeds = doc["grids"][gname].get("seeds", doc["seeds"])
            for seed in seeds[:1] if plan.smoke else seeds:
                run = _resolve_run(plan, cfg, paper, seed, scale_cfg)
                rid = plan.add_run(run)
                # the classes a run tells apart: a table's chance level (report.tables)
                classes = get_dataset(run["dataset"]).num_classes
                entry = {"id": rid, "stage": "train", "labels": {**labels, "seed": seed},
                         "classes": classes}  # fmt: skip
                if adapt is not None:
                    entry.update(id=plan.add_adapt(rid, adapt), stage="adapt", run=rid)
                grid_runs[gname].append(entry)
    plan.papers[paper] = []
    plan.titles[paper] = doc.get("title", paper)
    for item, spec in doc["items"].items():
        grid = spec.get("grid")  # structural items (payload) need no runs
        if grid is not None and grid not in grid_runs:
            raise ConfigError(f"items.{item}.grid: unknown grid {grid!r}")
        if grid is not None:
            at = f"{experiment_file(paper)} items.{item}.where"
            check_where(doc, grid, spec.get("where"), at)
        kind = ITEM_KINDS[spec["kind"]]
        reads = kind.reads(spec)
        runs = [
            _with_files(plan, r, reads)
            for r in grid_runs.get(grid, [])
            if _selected(r["labels"], spec.get("where"))
        ]
        parts: dict[str, dict] = {}
        for r in runs:
            pid = plan.runs[r.get("run", r["id"])]["partition_id"]
            keep = spec.get("partition_labels", ["dataset", "partition", "seed"])
            parts.setdefault(pid, {k: v for k, v in r["labels"].items() if k in keep})
        configs = _source_configs(plan, grid_runs, spec.get("sources", []), item)
        structure = _structure(plan, spec, configs) if kind.structure else None
        plan.items[f"{paper}/{item}"] = {
            "paper": paper,
            "item": item,
            "kind": spec["kind"],
            "title": spec.get("title", item),
            "caption": spec.get("caption", ""),
            "scale": plan.scale,
            "spec": spec,
            "runs": runs,
            "partitions": [
                {"id": k, "labels": v, "file": plan.path(f"partitions/{k}.json")}
                for k, v in parts.items()
            ],
            "reported": doc.get("reported"),
            **({"configs": configs} if configs else {}),
            **({"structure": structure} if structure else {}),
        }
        plan.papers[paper].append(item)
    plan.claims[paper] = {
        "paper": paper,
        "scale": plan.scale,
        "claims": doc.get("claims", []),
        "reported": doc.get("reported"),
    }


# metrics.json keys that the last evaluation (or no evaluation) gives: a run whose readers
# read only such keys is evaluated after its last round alone (training is unchanged: the
# evaluation draws from its own generators and leaves the model as it found it)
FINAL_ONLY = ("final_", "params.", "comm.", "local_clustering.", "wall_seconds")


def _reads_rounds(kind: str, spec: dict, metrics: set[str]) -> bool:
    """Whether an item of ``kind`` with ``spec`` (and the claims' ``metrics`` on it) reads a
    run's evaluations before the last one (a curve, the best round, when a metric settles)."""
    if "history" in ITEM_KINDS[kind].reads(spec):
        return True
    keys = {
        spec.get("metric", "final_acc"),
        *(spec.get("statistics") or {}).get("values", {}).values(),
        *metrics,
    }
    return not all(k.startswith(FINAL_ONLY) for k in keys)


def _claim_metrics(plan: Plan) -> dict[str, set[str]]:
    """``<paper>/<item>`` -> the metrics its paper's claims read on it (beside the item's own)."""
    out: dict[str, set[str]] = {}
    for paper, claims in plan.claims.items():
        for raw in claims["claims"]:
            if not isinstance(raw, dict) or not raw.get("metric"):
                continue
            named = {raw.get("item")}
            for key in ("left", "right", "select", "among"):  # selections may name items
                chosen = raw[key].get("item") if isinstance(raw.get(key), dict) else None
                named.update(chosen if isinstance(chosen, list) else [chosen])
            items = [i for i in plan.papers[paper] if i in named] or plan.papers[paper]
            for item in items:
                out.setdefault(f"{paper}/{item}", set()).add(str(raw["metric"]))
    return out


def _evaluate_where_read(plan: Plan) -> None:
    """Evaluate a run after its last round alone where no item or claim reads an earlier
    evaluation: its config gets ``eval_every: rounds`` (so a new id), and every reference to
    the run (its adaptations, the items' entries) follows."""
    claimed = _claim_metrics(plan)
    per_round: set[str] = set()
    for name, manifest in plan.items.items():
        if _reads_rounds(manifest["kind"], manifest["spec"], claimed.get(name, set())):
            per_round |= {r["id"] for r in manifest["runs"] if r["stage"] == "train"}
    renamed: dict[str, str] = {}
    runs, plan.runs, plan.train_jobs, plan.job_of = plan.runs, {}, {}, {}
    for rid, run in runs.items():
        rounds = int(run["train"]["rounds"])
        if rid not in per_round and int(run.get("eval_every", 1)) != rounds:
            run = {**run, "eval_every": rounds}
        renamed[rid] = plan.add_run(run)
    adapts, plan.adapts, plan.adapt_jobs, plan.adapt_job_of = plan.adapts, {}, {}, {}
    for aid, adapt in adapts.items():
        renamed[aid] = plan.add_adapt(renamed[adapt["run"]], adapt["adapt"])
    for manifest in plan.items.values():
        manifest["runs"] = [
            _with_files(plan, _renamed(e, renamed), e["files"]) for e in manifest["runs"]
        ]


def _renamed(entry: dict, renamed: dict[str, str]) -> dict:
    """An item's run entry with its (and its trained run's) new id."""
    return {**entry, **{k: renamed[entry[k]] for k in ("id", "run") if k in entry}}


def _with_files(plan: Plan, entry: dict, reads) -> dict:
    """An item's run entry with the paths of the result files it reads (``files``) and the
    record of the job that writes them (``built_by``)."""
    stage, rid = entry["stage"], entry["id"]
    files = {f: plan.path(STAGE_FILES[stage][f].format(id=rid)) for f in reads}
    record = plan.trained(rid) if stage == "train" else plan.adapted(rid)
    built = {"built_by": record} if files else {}
    return {**{k: v for k, v in entry.items() if k != "built_by"}, "files": files, **built}


def _source_configs(plan: Plan, grid_runs: dict, sources: list[dict], item: str) -> list[dict]:
    """Structural items (``parameters``): the model and algorithm of each row of each source
    (``{grid, rows, where, variants}``), taken from the grid's first run with that row
    label, once per variant where the source lists ``variants``; a source without a grid
    gives its rows' configs itself (``{rows, configs, variants}``: ``_given_configs``)."""
    configs = []
    for i, source in enumerate(sources):
        if "grid" not in source and "configs" in source:
            configs += _given_configs(source, f"items.{item}.sources[{i}]")
            continue
        if source.get("grid") not in grid_runs:
            raise ConfigError(
                f"items.{item}.sources[{i}].grid: unknown grid {source.get('grid')!r}"
            )
        seen = set()
        for r in grid_runs[source["grid"]]:
            label = r["labels"].get(source["rows"])
            if label is None:
                raise ConfigError(f"items.{item}.sources[{i}].rows: no label {source['rows']!r}")
            if label in seen or not _selected(r["labels"], source.get("where")):
                continue
            seen.add(label)
            rid = r.get("run", r["id"])
            run = plan.runs[rid]
            config = {
                "row": source["rows"],
                "label": label,
                "model": run["model"],
                "algorithm": run["algorithm"],
                "clients": plan.paper_clients.get(rid, run["partition"]["clients"]),
            }
            configs += _variants(config, source.get("variants"), f"items.{item}.sources[{i}]")
    return configs


VARIANT_KEYS = {"backbone", "num_classes", "model", "client_backbones"}
# what a source's given config may hold (structure.parameters.count_parameters)
GIVEN_KEYS = {"model", "algorithm", "clients", "server_model"}


def _given_configs(source: dict, where: str) -> list[dict]:
    """The rows of a source that names no grid: ``configs`` maps each row label to its
    ``model`` (a run's model block), ``algorithm`` (default FedAvg: every parameter trained),
    ``clients`` and optionally ``server_model`` (``models.server_models``). For the
    structural numbers of a method's model at backbones and class counts its runs do not
    have (FedHPL Tables 2 and 7-9)."""
    out = []
    for label, given in source["configs"].items():
        unknown = sorted(set(given or {}) - GIVEN_KEYS)
        if unknown:
            raise ConfigError(f"{where}.configs.{label}: unknown keys {unknown}")
        given = dict(given or {})
        model = given.pop("model", {})
        check_model(model, f"{where}.configs.{label}")
        algorithm = given.pop("algorithm", {"name": "fedavg"})
        _check_algorithm_name(algorithm, f"{where}.configs.{label}.algorithm")
        server = (given.get("server_model") or {}).get("name")
        if "server_model" in given and server not in server_model_names():
            allowed = ", ".join(sorted(server_model_names()))
            raise ConfigError(
                f"{where}.configs.{label}.server_model.name: {server!r} (allowed: {allowed})"
            )
        config = {
            "row": source["rows"],
            "label": str(label),
            "model": model,
            "algorithm": algorithm,
            "clients": int(given.pop("clients", 1)),
            **given,
        }
        out += _variants(config, source.get("variants"), where)
    return out


def _check_algorithm_name(algorithm: dict, where: str) -> None:
    """A given config's algorithm is a registered one and its keys are options it takes
    (names read from source, no torch)."""
    names, name = algorithm_options(), algorithm.get("name")
    if name not in names:
        raise ConfigError(f"{where}.name: {name!r} (allowed: {', '.join(sorted(names))})")
    for key in sorted(set(algorithm) - {"name"} - names[name]):
        allowed = ", ".join(sorted(names[name])) or "none"
        raise ConfigError(f"{where}.{key}: unknown option of algorithm {name} (allowed: {allowed})")


def _variants(config: dict, variants: dict | None, where: str) -> list[dict]:
    """A source row once, or once per variant (``{name: {backbone, num_classes, model,
    client_backbones}}``: the same method on another paper-scale backbone, class count or
    tuning option, or as a federation of clients of these backbones, counted together)."""
    if not variants:
        return [config]
    out = []
    for name, change in variants.items():
        unknown = sorted(set(change or {}) - VARIANT_KEYS)
        if unknown:
            raise ConfigError(f"{where}.variants.{name}: unknown keys {unknown}")
        change = dict(change or {})
        model = deep_merge(config["model"], change.pop("model", {}))
        check_model(model, f"{where}.variants.{name}")
        out.append({**config, **change, "model": model, "variant": str(name)})
    return out


def _structure(plan: Plan, spec: dict, configs: list[dict]) -> dict:
    """The structure job an item of a structural kind reads: its spec, id and JSON file."""
    job = {
        "kind": spec["kind"],
        "backbone": spec.get("backbone", "resnet26"),
        "num_classes": int(spec.get("num_classes", 10)),
    }
    if spec["kind"] == "payload":
        job["algorithm"] = spec.get("algorithm", "fedavg")
    else:
        backbones = spec.get("row_backbones", {})  # a row on another paper-scale backbone
        clash = sorted({c["label"] for c in configs if "backbone" in c and c["label"] in backbones})
        if clash:
            raise ConfigError(
                f"items: {clash} have both row_backbones and a variant's backbone; give one"
            )
        job["configs"] = [
            {**c, "backbone": backbones[c["label"]]} if c["label"] in backbones else c
            for c in configs
        ]
        if "quantities" in spec:  # a table shows com_cost with its aux column
            job["quantities"] = structure_quantities(spec)
    sid = structure_id(job)
    plan.structures.setdefault(sid, job)
    return {"id": sid, "file": plan.path(f"structure/{sid}.json")}


def _resolve_run(plan: Plan, cfg: dict, paper: str, seed: int, scale_cfg: dict) -> dict:
    """One run of a grid point at replicate ``seed``. The partition is drawn with ``seed``
    unless the config fixes ``partition.seed``; a ``cv`` block without ``fold`` takes the
    replicate as its fold (FedPCE: one partition, seeds 0–4 are its five folds)."""
    run = deep_merge(cfg, {"paper": paper, "seed": seed, "scale": plan.scale})
    clients, batch = run["partition"]["clients"], int(run["train"]["batch_size"])
    if plan.smoke:
        run = smoke_run(run, plan.smoke)
    if "cv" in run and "fold" not in run["cv"]:
        run["cv"] = {**run["cv"], "fold": seed}
        if seed >= run["cv"]["folds"]:
            raise ConfigError(
                f"experiments/{paper}: seed {seed} is a fold of cv.folds {run['cv']['folds']}"
            )
    where = f"experiments/{paper} run"
    validate({"data": {}, "partition_id": "", **run}, "run", where)  # before any lookup
    dataset = run["dataset"]
    run["data"] = _data_of(scale_cfg, dataset)
    _register_dataset(plan, shift_dataset(run.get("test_shift")), scale_cfg)
    _register_dataset(plan, public_dataset(run), scale_cfg)
    backbone = run["model"]["backbone"]
    names = _client_backbones(run, run["partition"]["clients"], where)
    mapping = scale_cfg.get("backbones", {})
    if names:  # a federation of different models may need other siblings (three ViT widths)
        mapping = {**mapping, **scale_cfg.get("federation_backbones", {})}
    if plan.scale == "mini":
        for name in (backbone, *names):
            if name not in mapping:
                raise ConfigError(f"scales.mini.backbones: no tiny sibling for {name!r}")
        run["model"]["backbone"] = backbone = mapping[backbone]
        if names:
            run["model"]["client_backbones"] = names = [mapping[n] for n in names]
    part = {"seed": seed, **run["partition"]}
    pid_body = {"dataset": dataset, "data": run["data"], "partition": part}
    pseed = part["seed"]
    pid = f"{dataset}-{part['scheme']}-k{part['clients']}-s{pseed}-{digest(pid_body, 8)}"
    run["partition_id"] = pid
    validate(run, "run", where)
    if plan.smoke:
        plan.paper_clients[run_id(run)] = clients
        plan.paper_batch[run_id(run)] = batch
    plan.partitions.setdefault(pid, {"dataset": dataset, "spec": part, "seed": pseed})
    plan.datasets.setdefault(dataset, run["data"])
    for name in dict.fromkeys([backbone, *names]) if run["model"].get("pretrained", True) else ():
        pre = dict(scale_cfg.get("pretrain", {}))
        pre.update(pre.pop("per_backbone", {}).get(name, {}))
        plan.backbones.setdefault(name, {"mode": "pretrain" if pre else "fetch", **pre})
        if pre:
            plan.datasets.setdefault(pre["dataset"], pre.get("data", run["data"]))
            probed = plan.probes.setdefault(name, [])
            probed[:] = sorted({*probed, dataset})
    return run


def _client_backbones(run: dict, clients: int, where: str) -> list[str]:
    """A run's ``model.client_backbones`` (clients of different models; none: []), checked
    against its clients and its ``model.backbone``."""
    names = run["model"].get("client_backbones") or []
    if names and run.get("cohort", "all") == "all" and len(names) != clients:
        raise ConfigError(
            f"{where}: model.client_backbones names {len(names)} backbones for {clients} clients"
        )
    if names and run["model"]["backbone"] not in names:
        raise ConfigError(f"{where}: model.backbone is none of model.client_backbones")
    return list(names)


def _data_of(scale_cfg: dict, dataset: str) -> dict:
    """The scale's data settings for ``dataset`` (mini: the synthetic analog's sizes)."""
    return deep_merge(scale_cfg.get("data", {}), scale_cfg.get("datasets", {}).get(dataset, {}))


def shift_dataset(shift: dict | None) -> str | None:
    """The dataset whose test split a test-time shift of ``kind: dataset`` reads (FedICON's
    attribute shift; fedrepro.fl.build.shifted_test), else None."""
    return shift.get("dataset") if shift and shift.get("kind") == "dataset" else None


def public_dataset(run: dict) -> str | None:
    """The dataset whose training split is a run's public data (FedMD; ``public.dataset``)."""
    return (run.get("public") or {}).get("dataset")


def _register_dataset(plan: Plan, name: str | None, scale_cfg: dict) -> None:
    """A dataset a run reads beside its own (a shift's, a public set) is then one the
    workflow prepares."""
    if name is not None:
        plan.datasets.setdefault(name, _data_of(scale_cfg, name))


def job_resources(scale_cfg: dict, stage: str) -> dict:
    """Slurm ``mem_mb`` and least ``runtime`` (minutes) of one job of ``stage`` (one member of
    a training or adaptation job) at attempt 1, from the scale's ``resources`` block."""
    job = scale_cfg.get("resources", {}).get(stage, {"mem_mb": 4000, "min_minutes": 30})
    return {"mem_mb": int(job["mem_mb"]), "runtime": math.ceil(float(job["min_minutes"]))}

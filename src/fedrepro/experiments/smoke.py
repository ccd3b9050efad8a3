"""The paper-shape smoke (config ``smoke``, ``config/smoke.yaml``): the paper-scale plan with
every model, image size, class count, tuning, algorithm and adaptation unchanged, shrunk
where only time and data go: synthetic data at each real dataset's shape (the scale's
``data`` block gets ``smoke.data``), at most ``clients`` clients a partition, ``rounds``
rounds of ``steps`` local steps at batch ``batch_size`` on each client's first ``images``
training images (and as many public samples a round: FedMD's), the first seed, and a
covering subset of the grids' cells: one cell per distinct (algorithm, backbone, tuning,
adaptation method), the one on the dataset earliest in ``prefer``, and one more for every
item none of those reach, so every item builder runs.
Partition schemes whose client count is their structure keep it, at its smallest: one client a
domain, or as many as make one new client where FedPCE marks a share new (``domain``), two a
kind (``fedpce_degradation``, m = 2 as in FedPCE's smallest setting, and a client's Dirichlet
share at least one image where the paper's asks for 10), every domain but one
(``leave_one_domain_out``).

Its numbers mean nothing; it shows that every paper-scale code path runs before a GPU hour is
spent, and what each job's memory is."""

from __future__ import annotations

__all__ = ["SMOKE_LABEL", "cover", "smoke_adapt", "smoke_run"]

SMOKE_LABEL = "paper smoke"  # the items' scale label: neither the paper's numbers nor mini's


def smoke_run(run: dict, smoke: dict) -> dict:
    """A resolved run's config shrunk to the smoke's schedule and clients."""
    train = {
        **run["train"],
        "rounds": int(smoke["rounds"]),
        "local_steps": int(smoke["steps"]),
        "batch_size": int(smoke["batch_size"]),
    }
    images = min(int(run.get("images", smoke["images"])), int(smoke["images"]))
    model = run["model"]
    if model.get("client_backbones"):  # clients of different models: one client a model, so
        # each (FedHPL's ViT-L, ResNet-50) is built, steps and is measured
        distinct = list(dict.fromkeys(model["client_backbones"]))
        partition = {**run["partition"], "clients": len(distinct)}
        model = {**model, "client_backbones": distinct}
    else:
        partition = _fewer_clients(run["partition"], int(smoke["clients"]))
    if isinstance(partition.get("k"), list):  # one class count a client: the kept clients'
        partition["k"] = partition["k"][: int(partition["clients"])]
    algorithm = run["algorithm"]
    if run.get("public"):  # public samples a round (FedMD's): at most a client's images
        algorithm = {**algorithm, "samples": min(int(algorithm.get("samples", images)), images)}
    return {**run, "train": train, "eval_every": 1, "images": images,
            "test_images": int(smoke["test_images"]), "partition": partition, "model": model,
            "algorithm": algorithm}  # fmt: skip


def _fewer_clients(part: dict, most: int) -> dict:
    """A partition with at most ``most`` clients, or, where the scheme's structure fixes the
    count, the fewest it allows."""
    scheme, clients = part["scheme"], int(part["clients"])
    if scheme == "fedpce_degradation":  # 6 kinds of m clients each, m = 2 the paper's least
        # (one new client a kind); at least one image a client (paper: 10 of ~3,300)
        return {**part, "m": 2, "clients": 12, "min_size": 1}
    if scheme == "domain":  # domains x clients_per_domain, a new one in each where some are
        per = int(part.get("clients_per_domain", 1))
        fewest = _fewest_with_new(float(part.get("new_fraction", 0.0)), per)
        return {**part, "clients_per_domain": fewest, "clients": clients // per * fewest}
    if scheme == "leave_one_domain_out":  # one client a remaining domain
        return part
    return {**part, "clients": min(clients, most)}


def _fewest_with_new(fraction: float, most: int) -> int:
    """The fewest clients of a group of which ``fraction`` (rounded) makes one new client
    (fedrepro.data.partitions.common.mark_new_clients), one where none are new."""
    if fraction <= 0:
        return 1
    return next((n for n in range(1, most + 1) if round(fraction * n) >= 1), most)


def smoke_adapt(adapt: dict, smoke: dict) -> dict:
    """An adapt block with its epochs or rounds at the smoke's rounds, its batch at the smoke's
    batch; the method and its other options as they are."""
    rounds = int(smoke["rounds"])
    out = dict(adapt)
    for key in ("epochs", "rounds", "eval_every"):
        if key in out:
            out[key] = rounds
    if "batch_size" in out:
        out["batch_size"] = int(smoke["batch_size"])
    return out


def combination(plan, entry: dict) -> tuple:
    """(algorithm, backbone, tuning, adaptation method or None) of an item's run entry; the
    backbone of clients of different models is their distinct backbones, joined by ``+``."""
    run = plan.runs[entry.get("run", entry["id"])]
    method = plan.adapts[entry["id"]]["adapt"]["method"] if entry["stage"] == "adapt" else None
    model = run["model"]
    backbone = "+".join(_backbones(model))
    return (run["algorithm"]["name"], backbone, model.get("tuning", "full"), method)


def _backbones(model: dict) -> list[str]:
    """A run's distinct backbones (its clients', or its one)."""
    return list(dict.fromkeys(model.get("client_backbones") or [model["backbone"]]))


def cover(plan) -> list[tuple]:
    """Keep, of the plan's item entries, the first of each distinct combination and the
    first of each item that no kept entry reaches; drop every other run, adaptation,
    partition, dataset and backbone. Returns the kept combinations."""
    rank = {name: i for i, name in enumerate(plan.smoke.get("prefer", []))}
    best: dict[tuple, tuple] = {}  # combination -> (cost, its entry on the most preferred dataset)
    for manifest in plan.items.values():
        for entry in manifest["runs"]:
            key = combination(plan, entry)
            run = plan.runs[entry.get("run", entry["id"])]
            cost = (rank.get(run["dataset"], len(rank)), int(run["partition"]["clients"]))
            if key not in best or cost < best[key][0]:
                best[key] = (cost, entry)
    kept = {entry["id"]: entry for _, entry in best.values()}
    for manifest in plan.items.values():
        if manifest["runs"] and not any(e["id"] in kept for e in manifest["runs"]):
            kept[manifest["runs"][0]["id"]] = manifest["runs"][0]
    _prune(plan, kept)
    return sorted(best, key=str)


def _prune(plan, kept: dict[str, dict]) -> None:
    """The plan with only the ``kept`` entries' runs and adaptations (and what they read)."""
    adapts = {i: plan.adapts[i] for i, e in kept.items() if e["stage"] == "adapt"}
    runs_kept = {e.get("run", i) for i, e in kept.items()}
    runs = {r: plan.runs[r] for r in plan.runs if r in runs_kept}
    plan.runs, plan.train_jobs, plan.job_of = {}, {}, {}
    plan.adapts, plan.adapt_jobs, plan.adapt_job_of = {}, {}, {}
    for run in runs.values():
        plan.add_run(run)
    for aid, adapt in adapts.items():
        plan.add_adapt(adapt["run"], adapt["adapt"])
        assert aid in plan.adapts  # the same id: the same run and block
    pids = {run["partition_id"] for run in runs.values()}
    plan.partitions = {k: v for k, v in plan.partitions.items() if k in pids}
    for manifest in plan.items.values():
        manifest["runs"] = [e for e in manifest["runs"] if e["id"] in kept]
        manifest["partitions"] = [p for p in manifest["partitions"] if p["id"] in pids]
        manifest["scale"] = SMOKE_LABEL
    for claims in plan.claims.values():
        claims["scale"] = SMOKE_LABEL
    used = {run["dataset"] for run in runs.values()}
    used |= {s["dataset"] for s in _shifts(runs, adapts) if s.get("kind") == "dataset"}
    plan.datasets = {k: v for k, v in plan.datasets.items() if k in used}
    backbones = {
        b
        for r in runs.values()
        if r["model"].get("pretrained", True)
        for b in _backbones(r["model"])
    }
    plan.backbones = {k: v for k, v in plan.backbones.items() if k in backbones}


def _shifts(runs: dict, adapts: dict) -> list[dict]:
    found = [r.get("test_shift") for r in runs.values()]
    found += [a["adapt"].get("shift") for a in adapts.values()]
    return [s for s in found if s]

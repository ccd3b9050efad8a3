"""Item and claim specs checked against the plan while the workflow is parsed (so ``snakemake
-n`` stops on them, before any job; their builders would fail only after every run they read
had trained): the labels an item lays out, the metric it reads, a claim's grammar, the items
it names and the labels it selects on. The experiment schema checks their shape. Each error
is one line naming the experiment file and the key."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fedrepro.experiments.checks import experiment_file
from fedrepro.experiments.config import ConfigError
from fedrepro.experiments.items import structure_quantities
from fedrepro.report.claims import SETTLE_RE, parse_claim
from fedrepro.report.parameters import BARE
from fedrepro.report.results import read_reported, reported_label_columns

# metrics.json keys of a run or an adaptation (fedrepro.jobs.train.summarize and
# write_results; docs/contracts.md); a test holds them equal to a run's
METRICS = (
    "final_acc", "final_acc_mean", "final_acc_per_client", "final_acc_per_class",
    "final_acc_min", "final_acc_max", "final_loss", "best_acc", "best_round",
    "best_acc_per_group", "best_acc_per_group_mean", "best_acc_mean", "rounds", "diverged",
    "diverged_rounds", "params.total", "params.trainable", "params.communicated",
    "params.new_at_inference", "comm.up_bytes_per_client_round",
    "comm.down_bytes_per_client_round", "comm.total_bytes", "comm.up_scalars_first_round",
    "comm.up_scalars_last_round", "wall_seconds", "seconds.setup", "seconds.train",
    "seconds.evaluate", "seconds.write", "peak_rss_mb", "peak_gpu_mb",
    "local_clustering.silhouette", "local_clustering.shuffled", "local_clustering.gain",
)  # fmt: skip
# history.csv columns (fedrepro.jobs.train.HISTORY_COLUMNS; a test holds them equal)
HISTORY = ("round", "acc", "acc_mean", "loss", "lr", "clients", "up_bytes", "down_bytes",
           "seconds", "diverged", "excluded")  # fmt: skip
# the spec keys of each figure type that name labels (fedrepro.report.figures)
FIGURE_LABELS = {
    "curves": ("panels", "lines", "style"),
    "sweep": ("x", "panels", "lines", "style"),
    "bars": ("groups", "bars", "panels"),
}


def _names(value: Any) -> list[str]:
    return [value] if isinstance(value, str) else list(value or [])


def item_labels(manifest: dict[str, Any]) -> set[str]:
    """The labels an item's cells carry: its runs' (the grid's axes and ``seed``) and those
    its spec adds (``per_client``, ``statistics.label``)."""
    spec = manifest["spec"]
    labels = {k for run in manifest["runs"] for k in run["labels"]}
    labels |= {spec["per_client"]} if spec.get("per_client") else set()
    return labels | ({spec["statistics"]["label"]} if spec.get("statistics") else set())


def _metric(metric: str, history: bool, at: str) -> None:
    settle = SETTLE_RE.match(metric)
    if history or settle:
        column = settle.group(1) if settle else metric
        if column not in HISTORY:
            raise ConfigError(f"{at}: {column!r} is not a history.csv column "
                              f"(allowed: {', '.join(HISTORY)})")  # fmt: skip
    elif metric not in METRICS:
        raise ConfigError(f"{at}: {metric!r} is not a metrics.json key "
                          f"(allowed: {', '.join(METRICS)})")  # fmt: skip


def check_item(paper: str, item: str, manifest: dict[str, Any]) -> None:
    """An item's spec against its runs: the labels it lays out and the metric it reads."""
    spec, at = manifest["spec"], f"{experiment_file(paper)} items.{item}"
    if manifest["kind"] == "parameters" and spec.get("unit", "M") not in BARE:
        raise ConfigError(f"{at}.unit: {spec['unit']!r} (allowed: {', '.join(BARE)})")
    if manifest["kind"] not in ("table", "figure") or not manifest["runs"]:
        return
    figure = spec.get("figure")
    keys = ("rows", "columns") if manifest["kind"] == "table" else FIGURE_LABELS.get(figure, ())
    labels = item_labels(manifest)
    for key in keys:
        for name in _names(spec.get(key)):
            if name not in labels and not (figure == "curves" and key == "x"):
                raise ConfigError(f"{at}.{key}: {name!r} is not a label of its runs "
                                  f"(allowed: {', '.join(sorted(labels))})")  # fmt: skip
    for i, d in enumerate(spec.get("diff") or []):
        if d["label"] not in _names(spec.get("columns")):
            raise ConfigError(f"{at}.diff[{i}].label: {d['label']!r} is not one of its columns")
    versus = spec.get("versus")
    if versus and versus["label"] not in _names(spec.get("rows")):
        raise ConfigError(f"{at}.versus.label: {versus['label']!r} is not one of its rows")
    if figure in FIGURE_LABELS or manifest["kind"] == "table":
        values = (spec.get("statistics") or {}).get("values")
        metrics = values.values() if values else [spec.get("metric", "final_acc")]
        for metric in metrics:
            _metric(metric, figure == "curves", f"{at}.metric")


def check_claims(
    paper: str, claims: list, items: dict[str, dict[str, Any]], reported: set[str]
) -> None:
    """A paper's claims: their grammar (fedrepro.report.claims.parse_claim), the items they
    name, their metric, and the labels they select and pair on (those of the items they read,
    the ``reported`` transcription's columns, ``item`` and ``quantity``)."""
    file = experiment_file(paper)
    for i, raw in enumerate(claims):
        at = f"{file} claims[{i}]"
        try:
            claim = parse_claim(raw, i)
        except ValueError as err:
            raise ConfigError(f"{at}: {err}") from None
        at = f"{file} claims[{i}] ({claim.id})"
        named = [claim.item] + [
            n for s in (claim.left, claim.right, claim.select, claim.among)
            for n in _names(s.get("item"))
        ]  # fmt: skip
        for name in (n for n in named if n is not None):
            if name not in items:
                raise ConfigError(f"{at}.item: {name!r} is not an item of {paper} "
                                  f"(allowed: {', '.join(items)})")  # fmt: skip
        read = [items[n] for n in named if n is not None] or list(items.values())
        structural = {q for m in read if m["kind"] == "parameters"
                      for q in structure_quantities(m["spec"])}  # fmt: skip
        if claim.metric and claim.metric not in structural:
            _metric(claim.metric, False, f"{at}.metric")
        labels = {"item", "quantity", "variant", *reported} | {
            k for m in read for k in item_labels(m) | _structure_labels(m)
        }
        selections = {"left": claim.left, "right": claim.right, "select": claim.select,
                      "among": claim.among, "pair_on": claim.pair_on,
                      "group_by": claim.group_by}  # fmt: skip
        for key, chosen in selections.items():
            for name in chosen:
                if name not in labels and name != "seed":
                    raise ConfigError(f"{at}.{key}: {name!r} is not a label of the items it "
                                      f"reads (allowed: {', '.join(sorted(labels))})")  # fmt: skip


def _structure_labels(manifest: dict[str, Any]) -> set[str]:
    """A parameters item's row labels (each source's ``rows``)."""
    return {s["rows"] for s in manifest["spec"].get("sources", [])}


def check_specs(plan, repo: Path) -> None:
    """Every item and claim of the plan (``fedrepro.experiments.plan.Plan``); ``repo``: where
    the experiment files' paths start."""
    for paper, names in plan.papers.items():
        items = {n: plan.items[f"{paper}/{n}"] for n in names}
        for name, manifest in items.items():
            check_item(paper, name, manifest)
        # the paper's cells carry its transcription's label columns too; a transcription not
        # there is none (fedrepro.experiments.checks.check_reported)
        reported = plan.claims[paper]["reported"]
        frame = read_reported(Path(repo) / reported) if reported else None
        columns = set(reported_label_columns(frame)) if frame is not None else set()
        check_claims(paper, plan.claims[paper]["claims"], items, columns)

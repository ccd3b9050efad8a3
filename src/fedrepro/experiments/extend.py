"""What the configuration adds to the experiment files without editing them (config
``methods`` and ``set``; docs/your_method.md):

- a **method from outside** the repository: a user's ``Algorithm`` subclass in a Python file,
  added as a value of the method axis of every grid of the named papers that compares
  methods (its axis lists more than one), with the paper's defaults where the method says
  nothing else; each table item showing it gets the claim that it tops the others. Its run
  config carries the file and its sha256 (``algorithm.from``), so its run ids follow the
  file's text; its options are read from the file's source (no import, no torch);
- **run options for a selection of runs** (``set``): ``{where, set}`` entries in the form of
  an experiment file's ``overrides``, with ``paper`` and ``grid`` besides the axes in
  ``where``, applied after the file's own overrides.

Both act on the experiment document before the plan expands it, so every check, id and
item follows as for the file's own settings.
"""

from __future__ import annotations

import copy
import hashlib
from pathlib import Path

from fedrepro.experiments.config import ConfigError
from fedrepro.experiments.options import algorithm_options, file_algorithms

# the axis that names a paper's methods (where it is not ``method``)
METHOD_AXES = {"adapters": "algorithm"}
OUTSIDE_KEYS = ("from", "papers", "priced_as")  # a methods entry's keys that are not run keys


def method_axis(paper: str) -> str:
    return METHOD_AXES.get(paper, "method")


def file_hash(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def outside_methods(methods: dict, workdir: Path) -> dict[str, dict]:
    """Config ``methods`` checked, each as the axis value it adds (its run keys, the
    algorithm block naming its file and hash) with its ``papers``. A file's path is taken
    relative to ``workdir`` (where Snakemake runs) unless absolute."""
    out = {}
    for label, entry in (methods or {}).items():
        at = f"config methods.{label}"
        path = Path(entry["from"]).expanduser()
        path = path if path.is_absolute() else Path(workdir) / path
        if not path.is_file():
            raise ConfigError(f"{at}.from: no file {path}")
        algorithm = dict(entry["algorithm"])
        name = algorithm["name"]
        if name in algorithm_options():
            raise ConfigError(
                f"{at}.algorithm.name: {name!r} is a built-in algorithm; give the class "
                "another name"
            )
        defined = file_algorithms(str(path))
        if name not in defined:
            names = ", ".join(sorted(defined)) or "none"
            raise ConfigError(
                f"{at}.from: {path} defines no algorithm named {name!r} (it defines: {names})"
            )
        for key in sorted(set(algorithm) - {"name"} - defined[name]):
            allowed = ", ".join(sorted(defined[name])) or "none"
            raise ConfigError(
                f"{at}.algorithm.{key}: unknown option of algorithm {name} (allowed: {allowed})"
            )
        priced = entry.get("priced_as", "fedavg")
        if priced not in algorithm_options():
            names = ", ".join(sorted(algorithm_options()))
            raise ConfigError(f"{at}.priced_as: {priced!r} is no built-in algorithm ({names})")
        algorithm["from"] = {"file": str(path.resolve()), "sha256": file_hash(path),
                             "priced_as": priced}  # fmt: skip
        value = {k: copy.deepcopy(v) for k, v in entry.items() if k not in OUTSIDE_KEYS}
        out[label] = {"value": {**value, "algorithm": algorithm}, "papers": list(entry["papers"])}
    return out


def compares_methods(doc: dict, grid: str, axis: str) -> bool:
    """Whether ``grid`` of an experiment document sets methods side by side on ``axis``."""
    chosen = doc["grids"][grid].get(axis)
    several = len(doc["axes"][axis]) > 1 if chosen == "all" else isinstance(chosen, list)
    return several and (chosen == "all" or len(chosen) > 1)


def with_methods(paper: str, doc: dict, methods: dict[str, dict]) -> dict:
    """The experiment document with the outside methods that name ``paper``: a value of its
    method axis each, in every grid that compares methods, in the ``where`` of every item
    that lists several of them (a structural item's sources keep the paper's own rows: it
    counts parameters the library's models define), and a generated claim per table item."""
    mine = {label: m for label, m in methods.items() if paper in m["papers"]}
    if not mine:
        return doc
    axis = method_axis(paper)
    if axis not in doc["axes"]:
        raise ConfigError(f"config methods: experiments/{paper} has no method axis {axis!r}")
    doc = copy.deepcopy(doc)
    own = list(doc["axes"][axis])
    clash = sorted(set(mine) & set(own))
    if clash:
        raise ConfigError(f"config methods: {clash} already name methods of experiments/{paper}")
    grids = [g for g in doc["grids"] if compares_methods(doc, g, axis)]
    for label, method in mine.items():
        doc["axes"][axis][label] = method["value"]
    for g in grids:
        if isinstance(doc["grids"][g][axis], list):
            doc["grids"][g][axis] = [*doc["grids"][g][axis], *mine]
    for name, spec in doc["items"].items():
        if spec.get("grid") not in grids and not spec.get("sources"):
            continue
        where = spec.get("where") or {}
        if isinstance(where.get(axis), list) and len(where[axis]) > 1:
            spec["where"] = {**where, axis: [*where[axis], *mine]}
        for source in spec.get("sources", []):
            if "grid" in source:
                source["where"] = {**(source.get("where") or {}), axis: own}
        if spec["kind"] == "table" and spec.get("grid") in grids and _shows(spec, where, axis):
            doc.setdefault("claims", []).extend(_claims(name, spec, axis, list(mine)))
    return doc


def _shows(spec: dict, where: dict, axis: str) -> bool:
    """Whether a table item shows several methods (its rows or columns include the axis)."""
    chosen = where.get(axis)
    if chosen is not None and not (isinstance(chosen, list) and len(chosen) > 1):
        return False
    labels = [*_as_list(spec.get("rows")), *_as_list(spec.get("columns"))]
    return axis in labels


def _as_list(value) -> list:
    return value if isinstance(value, list) else [] if value is None else [value]


def _claims(item: str, spec: dict, axis: str, labels: list[str]) -> list[dict]:
    """Per outside method: it tops every other method in each cell group of table ``item``
    (the table's row and column labels but the method's)."""
    groups = [a for a in (*_as_list(spec.get("rows")), *_as_list(spec.get("columns"))) if a != axis]
    title = spec.get("title", item).split(":")[0]
    return [
        {
            "id": f"outside_{_slug(label)}_tops_{item}",
            "text": f"{label} (outside method) beats the best other method of {title}, in "
            f"each {' × '.join(groups) or 'table'}",
            "item": item,
            "kind": "rank",
            "select": {axis: label},
            "group_by": groups,
            "quantifier": "all",
        }
        for label in labels
    ]


def _slug(label: str) -> str:
    return "".join(c if c.isalnum() else "_" for c in label.lower()).strip("_")


def with_set(paper: str, doc: dict, entries: list[dict]) -> dict:
    """The experiment document with config ``set`` entries that select ``paper`` appended to
    its ``overrides`` (``where.paper`` and ``where.grid`` narrow an entry to papers and grids;
    its other keys are the paper's axes). An entry whose axes ``paper`` lacks is not its."""
    doc = copy.deepcopy(doc)
    for i, entry in enumerate(entries or []):
        where = dict(entry["where"])
        papers = _as_list(where.pop("paper", None))
        grids = _as_list(where.pop("grid", None))
        if papers and paper not in papers or not set(where) <= set(doc["axes"]):
            continue
        unknown = sorted(set(grids) - set(doc["grids"]))
        if unknown:
            raise ConfigError(
                f"config set[{i}].where.grid: {unknown} not grids of experiments/{paper} "
                f"(allowed: {', '.join(doc['grids'])})"
            )
        for key, value in where.items():
            allowed = list(doc["axes"][key])
            for v in _as_list(value):
                if v not in allowed:
                    raise ConfigError(
                        f"config set[{i}].where.{key}: {v!r} is not one of its values in "
                        f"experiments/{paper} (allowed: {', '.join(map(str, allowed))})"
                    )
        over = {"where": where, "set": copy.deepcopy(entry["set"]), "origin": f"config set[{i}]"}
        if grids:
            over["grids"] = grids
        doc.setdefault("overrides", []).append(over)
    return doc


def check_set_used(entries: list[dict], docs: dict[str, dict]) -> None:
    """Each ``set`` entry selects some paper's axes (one that matches none is a typo)."""
    for i, entry in enumerate(entries or []):
        where = {k: v for k, v in entry["where"].items() if k not in ("paper", "grid")}
        papers = _as_list(entry["where"].get("paper")) or list(docs)
        missing = sorted(set(papers) - set(docs))
        if missing:
            raise ConfigError(f"config set[{i}].where.paper: {missing} not in config papers")
        if not any(set(where) <= set(docs[p]["axes"]) for p in papers):
            axes = sorted({a for p in papers for a in docs[p]["axes"]})
            raise ConfigError(
                f"config set[{i}].where: {sorted(where)} are not axes of one paper "
                f"(allowed: paper, grid, {', '.join(axes)})"
            )

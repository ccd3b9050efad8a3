"""Checks of an experiment file that the schemas cannot make, run while the plan is built (so
``snakemake -n`` stops on them, before any job): every option block against what its
algorithm, tuning or adaptation method takes (``fedrepro.experiments.options``), and every
``where:`` against the values of the grid it selects from. Each error is one line naming
the file, the key and what is allowed."""

from __future__ import annotations

import csv
import re
from pathlib import Path

from fedrepro.experiments.config import ConfigError, _validator
from fedrepro.experiments.options import adapt_options, algorithm_options, tuning_options


def experiment_file(paper: str) -> str:
    return f"config/experiments/{paper}.yaml"


def origin(doc: dict, labels: dict, path: tuple[str, ...]) -> str:
    """Where in the experiment file a grid point's setting at ``path`` comes from: the last
    of the overrides, axis values and defaults that sets it (the one the merge kept)."""
    blocks = [("defaults", doc["defaults"])]
    blocks += [(f"axes.{a}.{v}", doc["axes"][a][v]) for a, v in labels.items()]
    blocks += [(f"{o.get('origin', f'overrides[{i}]')}.set", o["set"])
               for i, o in enumerate(doc.get("overrides", []))
               if selected(labels, o["where"])]  # fmt: skip
    for prefix, block in reversed(blocks):
        if _holds(block, path):
            return ".".join([prefix, *path])
    return ".".join(["defaults", *path])


def _holds(block: dict, path: tuple[str, ...]) -> bool:
    """Whether ``block`` sets the key at ``path`` (to any value, None too)."""
    node = block
    for key in path[:-1]:
        node = node.get(key) if isinstance(node, dict) else None
    return isinstance(node, dict) and path[-1] in node


def selected(labels: dict, where: dict | None) -> bool:
    """Whether a grid point's ``labels`` match a ``where:`` (a value or a list of values)."""
    return all(
        labels.get(k) in (v if isinstance(v, list) else [v]) for k, v in (where or {}).items()
    )


def _refuse(where: str, key: str, allowed: frozenset[str], what: str) -> None:
    if key not in allowed:
        names = ", ".join(sorted(allowed)) or "none"
        raise ConfigError(f"{where}: unknown option of {what} (allowed: {names})")


def _check_keys(name, keys, allowed: dict[str, frozenset[str]], what: str, where_of) -> None:
    """``keys`` of a block naming ``name`` (an algorithm, tuning or adaptation method) are
    among those ``allowed[name]`` takes (a name not in ``allowed`` is left to the schemas,
    which list the names); ``where_of(key)``: where the key is set."""
    if name in allowed:
        for key in keys:
            _refuse(where_of(key), key, allowed[name], f"{what} {name}")


def _check_tuning(model: dict, where_of) -> None:
    """A model block's ``tuning_options`` hold only what its tuning takes."""
    chosen = model.get("tuning_options") or {}
    if isinstance(chosen, dict):
        _check_keys(model.get("tuning", "full"), chosen, tuning_options(), "tuning", where_of)


def check_options(paper: str, doc: dict, labels: dict, cfg: dict, adapt: dict | None) -> None:
    """A grid point's ``algorithm``, ``model.tuning_options`` and ``adapt`` blocks hold only
    what their algorithm, tuning and adaptation method take."""

    def at(*path: str) -> str:
        return f"{experiment_file(paper)} {origin(doc, labels, path)}"

    algorithm = cfg.get("algorithm")
    if isinstance(algorithm, dict):
        keys = [k for k in algorithm if k != "name"]
        _check_keys(algorithm.get("name"), keys, algorithm_options(), "algorithm",
                    lambda key: at("algorithm", key))  # fmt: skip
    model = cfg.get("model") if isinstance(cfg.get("model"), dict) else {}
    _check_tuning(model, lambda key: at("model", "tuning_options", key))
    if isinstance(adapt, dict):
        keys = [k for k in adapt if k != "method"]
        _check_keys(adapt.get("method"), keys, adapt_options(), "adapt method",
                    lambda key: at("adapt", key))  # fmt: skip


def check_model(model: dict, where: str) -> None:
    """A structural item's variant model: the run schema's model keys, and the
    ``tuning_options`` of its tuning."""
    known = _validator("run").schema["properties"]["model"]["properties"]
    for key in model:
        if key not in known:
            allowed = ", ".join(sorted(known))
            raise ConfigError(f"{where}.model.{key}: unknown key (allowed: {allowed})")
    _check_tuning(model, lambda key: f"{where}.model.tuning_options.{key}")


def check_where(doc: dict, grid: str | None, where: dict | None, at: str) -> None:
    """A ``where:`` names axes of the grid (or ``seed``; without a grid, as an override's:
    axes of the file) and values those axes have."""
    axes = [a for a in doc["grids"][grid] if a != "seeds"] if grid else list(doc["axes"])
    scope = f"grid {grid}" if grid else "the file"
    for key, value in (where or {}).items():
        if key == "seed" and grid:
            allowed = doc["grids"][grid].get("seeds", doc["seeds"])
        elif key in axes:
            allowed = list(doc["axes"][key])
        else:
            names = ", ".join([*axes, *(["seed"] if grid else [])])
            raise ConfigError(f"{at}.{key}: not an axis of {scope} (allowed: {names})")
        for v in value if isinstance(value, list) else [value]:
            if v not in allowed:
                names = ", ".join(map(str, allowed))
                raise ConfigError(f"{at}.{key}: {v!r} is not one of its values (allowed: {names})")


def check_overrides(paper: str, doc: dict) -> None:
    """Each override's ``where:`` (one that matched nothing was applied nowhere, silently)."""
    for i, over in enumerate(doc.get("overrides", [])):
        check_where(doc, None, over["where"], f"{experiment_file(paper)} overrides[{i}].where")


NUMBER = re.compile(r"^-?\d+(\.\d*)?([eE][-+]?\d+)?$")
PRINTED = re.compile(r"^-?\d+(\.\d*)?([eE][-+]?\d+)?[KM]?$")  # a count as printed: 5.1K, 11.2M
# what a transcription holds: the paper's cells (doc ``reported``), a parameters item's printed
# counts, a payload item's sizes (fedrepro.report.results, .parameters, .payload read them)
REPORTED_COLUMNS = {
    "cells": ("item", "value"),
    "parameters": ("row", "label", "quantity", "value"),
    "payload": ("quantity", "value"),
}


def check_transcriptions(repo: Path, doc: dict) -> None:
    """A paper's transcriptions: its cells (``reported``) and its items' own."""
    if doc.get("reported"):
        check_reported(repo, doc["reported"], "cells")
    for spec in doc["items"].values():
        if spec.get("reported"):
            use = spec["kind"] if spec["kind"] in REPORTED_COLUMNS else "cells"
            check_reported(repo, spec["reported"], use)


def check_reported(repo: Path, path: str, use: str) -> None:
    """A transcription of a paper's numbers (``config/reported/*.csv``) reads as the report
    reads it: every quote closed, every row as many fields as the header, the columns its use
    needs, ``value`` a number (a printed count may end in K or M), ``std`` a number or blank.
    ``path`` is relative to the repository ``repo``. A file that is not there is no
    transcription (the report shows no paper values)."""
    if not (Path(repo) / path).is_file():
        return
    with open(Path(repo) / path, newline="") as fh:
        reader = csv.reader(fh, strict=True)
        rows, line = [], 1
        try:
            for row in reader:
                rows.append((line, row))
                line = reader.line_num + 1
        except csv.Error as err:
            closed = "end of data" not in str(err)
            why = f"a quote is not closed ({err})" if closed else "a quote is not closed"
            raise ConfigError(f"{path}:{line}: {why}") from None
    if not rows:
        raise ConfigError(f"{path}:1: no header")
    header = rows[0][1]
    missing = [c for c in REPORTED_COLUMNS[use] if c not in header]
    if missing:
        raise ConfigError(f"{path}:1: no column {missing[0]!r} (header: {', '.join(header)})")
    value = PRINTED if use == "parameters" else NUMBER
    for line, row in rows[1:]:
        if not row:
            continue
        if len(row) != len(header):
            raise ConfigError(
                f"{path}:{line}: {len(row)} fields, the header has {len(header)} "
                f"({', '.join(header)})"
            )
        cells = dict(zip(header, row, strict=True))
        if not value.match(cells["value"]):
            raise ConfigError(f"{path}:{line}: value {cells['value']!r} is not a number")
        if cells.get("std") and not NUMBER.match(cells["std"]):
            raise ConfigError(f"{path}:{line}: std {cells['std']!r} is not a number or blank")

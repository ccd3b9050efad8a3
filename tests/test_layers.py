"""Import contract between the layers of ``src/fedrepro``, checked statically with ``ast``.

A module's layer is its top-level subpackage (``fedrepro/fl/engine.py`` -> ``fl``); the
utility modules ``fedrepro.arithmetic``, ``fedrepro.atomic``, ``fedrepro.checksums``,
``fedrepro.device``, ``fedrepro.discipline``, ``fedrepro.geometry``, ``fedrepro.logs``,
``fedrepro.memory`` and ``fedrepro/__init__.py`` form the ``utilities``
layer. Every layer may import itself and ``utilities``; any other ``fedrepro`` import must be
listed in ``ALLOWED``. No module may import ``snakemake`` or the workflow's code (``workflow/``).
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"

UTILITIES = "utilities"
UTILITY_MODULES = frozenset(
    {"arithmetic", "atomic", "checksums", "device", "discipline", "geometry", "logs", "memory"}
)

ALLOWED: dict[str, frozenset[str]] = {
    UTILITIES: frozenset(),
    "experiments": frozenset({"data"}),  # the registry's dataset facts (no torch: tested)
    "data": frozenset(),
    "models": frozenset(),
    "fl": frozenset({"data", "models"}),
    "algorithms": frozenset({"fl", "models"}),
    "structure": frozenset({"models", "fl", "algorithms"}),
    "tta": frozenset({"data", "models", "fl", "algorithms"}),
    "jobs": frozenset({"experiments", "data", "models", "fl", "algorithms", "structure", "tta"}),
    "report": frozenset({"experiments"}),
    "cost": frozenset({"experiments", "data", "models", "fl", "algorithms", "structure", "tta"}),
    "bench": frozenset(
        {
            "experiments",
            "data",
            "models",
            "fl",
            "algorithms",
            "structure",
            "tta",
            "report",
            "jobs",
            "cost",
        }
    ),  # fmt: skip
}
"""Layer -> the other layers it may import (besides itself and ``utilities``).

docs/architecture.md holds the same table; change both together.
"""

FORBIDDEN_TOP = frozenset({"snakemake", "workflow", "scripts"})
"""Top-level imports no library module may make (Snakemake, the workflow's own code)."""


def _layer(parts: tuple[str, ...]) -> str:
    """Layer of a dotted ``fedrepro`` name given as its parts after ``fedrepro``."""
    if not parts or parts[0] == "__init__" or parts[0] in UTILITY_MODULES:
        return UTILITIES
    return parts[0]


def _imported(node: ast.AST, module: tuple[str, ...], is_pkg: bool) -> list[tuple[str, ...]]:
    """Absolute dotted names (as parts) that one import statement brings in."""
    if isinstance(node, ast.Import):
        return [tuple(alias.name.split(".")) for alias in node.names]
    if not isinstance(node, ast.ImportFrom):
        return []
    if node.level == 0:
        base = tuple((node.module or "").split("."))
    else:
        package = module if is_pkg else module[:-1]
        package = package[: len(package) - (node.level - 1)]
        base = package + (tuple(node.module.split(".")) if node.module else ())
    if node.module is None or base == ("fedrepro",):
        # `from . import x` / `from fedrepro import x`: x may be a subpackage.
        return [base + (alias.name,) for alias in node.names]
    return [base]


def check_layers(root: Path) -> list[str]:
    """Violations of the layer contract in the ``fedrepro`` package under ``root`` (a ``src``
    directory; workflow scripts are looked for in ``root/../workflow``).

    Each is ``"fedrepro/<file>.py:<line> <message>"``; an empty list means the tree is clean.
    """
    root = Path(root)
    # Workflow scripts are run by path, so an import of one would be by its bare name.
    scripts = {p.stem for p in (root.parent / "workflow").rglob("*.py")}
    forbidden = FORBIDDEN_TOP | (scripts - sys.stdlib_module_names)
    violations = []
    for path in sorted((root / "fedrepro").rglob("*.py")):
        rel = path.relative_to(root)
        is_pkg = path.name == "__init__.py"
        module = rel.with_suffix("").parts
        if is_pkg:
            module = module[:-1]
        layer = _layer(module[1:])
        where = rel.as_posix()
        if layer not in ALLOWED:
            violations.append(f"{where}:1 unknown layer {layer!r}: add it to the layer table")
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
            for name in _imported(node, module, is_pkg):
                if name[0] in forbidden:
                    violations.append(f"{where}:{node.lineno} {layer} imports {'.'.join(name)}")
                    continue
                if name[0] != "fedrepro":
                    continue
                target = _layer(name[1:])
                if target in (layer, UTILITIES) or target in ALLOWED[layer]:
                    continue
                if target not in ALLOWED:
                    target = f"{target} (unknown layer: add it to the layer table)"
                violations.append(f"{where}:{node.lineno} {layer} imports {target}")
    return violations


def test_import_layers():
    violations = check_layers(SRC)
    assert not violations, "layer contract violated:\n" + "\n".join(violations)


def test_checker_catches_violations(tmp_path):
    files = {
        "fedrepro/__init__.py": "",
        "fedrepro/atomic.py": "import os\n",
        "fedrepro/jobs/__init__.py": "",
        "fedrepro/jobs/train.py": "from fedrepro.report import tables\n",
        "fedrepro/report/__init__.py": "from . import tables\n",
        "fedrepro/report/tables.py": "import fedrepro.atomic\nfrom ..experiments import config\n",
        "fedrepro/report/x.py": (
            "import json\n"
            "from fedrepro.jobs.train import train_run\n"
            "def f():\n"
            "    from ..fl import engine\n"
            "    import snakemake\n"
            "    from fedrepro import models\n"
            "    import plot_runs\n"
        ),
        "fedrepro/newlayer/__init__.py": "",
    }
    for name, text in files.items():
        (tmp_path / "src" / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "src" / name).write_text(text)
    (tmp_path / "workflow" / "scripts").mkdir(parents=True)
    (tmp_path / "workflow" / "scripts" / "plot_runs.py").write_text("")
    assert check_layers(tmp_path / "src") == [
        "fedrepro/jobs/train.py:1 jobs imports report",
        "fedrepro/newlayer/__init__.py:1 unknown layer 'newlayer': add it to the layer table",
        "fedrepro/report/x.py:2 report imports jobs",
        "fedrepro/report/x.py:4 report imports fl",
        "fedrepro/report/x.py:5 report imports snakemake",
        "fedrepro/report/x.py:6 report imports models",
        "fedrepro/report/x.py:7 report imports plot_runs",
    ]


DATA_PARTS: dict[str, frozenset[str]] = {
    "prepared": frozenset(),
    "imageops": frozenset(),
    "sources": frozenset({"prepared", "imageops"}),
    "transforms": frozenset({"sources", "prepared", "imageops"}),
    "synthetic": frozenset({"sources", "transforms", "prepared", "imageops"}),
    "partitions": frozenset({"transforms", "prepared"}),
    "build": frozenset({"sources", "synthetic", "prepared", "imageops"}),
}
"""The data layer's parts (a subpackage or a top module of ``fedrepro.data``) -> the other parts
each may import: the real sources and the analogs never import partitions, and a transform never
imports an analog. docs/architecture.md says the same; change both together."""


def test_the_data_layer_parts_import_only_their_own_lower_parts():
    data = SRC / "fedrepro" / "data"
    found = {p.name.removesuffix(".py") for p in data.iterdir() if p.name != "__init__.py"}
    assert found - {"__pycache__"} == set(DATA_PARTS), "add the new part to DATA_PARTS"
    violations = []
    for path in sorted(data.rglob("*.py")):
        rel = path.relative_to(SRC)
        part = rel.parts[2].removesuffix(".py")
        if part == "__init__":
            continue
        module = rel.with_suffix("").parts
        is_pkg = path.name == "__init__.py"
        module = module[:-1] if is_pkg else module
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            for name in _imported(node, module, is_pkg):
                if name[:2] != ("fedrepro", "data") or len(name) < 3:
                    continue
                if name[2] not in (part, *DATA_PARTS[part]):
                    violations.append(f"{rel}:{node.lineno} {part} imports data.{name[2]}")
    assert not violations, "\n".join(violations)

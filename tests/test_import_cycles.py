"""No import circle between the library's modules (issue 32: report/embeddings.py imported
report/figures.py, which imported it back inside a function): every ``fedrepro`` import,
at module level or inside a function, read from the source."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"


def _module_name(path: Path) -> str:
    parts = path.relative_to(SRC).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph(src: Path = SRC) -> dict[str, set[str]]:
    """Each module of ``fedrepro`` → the ``fedrepro`` modules it imports anywhere in it."""
    files = {_module_name(f): f for f in (src / "fedrepro").rglob("*.py")}
    graph = {}
    for name, path in files.items():
        deps = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                for alias in node.names:  # `from fedrepro.report import results` is a module
                    full = f"{node.module}.{alias.name}"
                    deps.add(full if full in files else node.module)
            elif isinstance(node, ast.Import):
                deps.update(alias.name for alias in node.names)
        graph[name] = {d for d in deps if d in files and d != name}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The import circles: strongly connected groups of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_the_library_has_no_import_circle():
    graph = import_graph()
    assert cycles(graph) == []
    assert "fedrepro.report.panels" in graph["fedrepro.report.embeddings"]


def test_a_circle_is_found():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


@pytest.mark.parametrize("module", ["embeddings", "figures", "panels"])
def test_each_figure_module_imports_alone(module):
    code = f"import fedrepro.report.{module}"
    subprocess.run([sys.executable, "-c", code], check=True, capture_output=True)

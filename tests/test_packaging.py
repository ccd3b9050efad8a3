"""The conda environment (envs/fedrepro.yaml) pins exactly what pyproject.toml pins, and
pyproject.toml declares every package the library imports."""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from importlib.metadata import packages_distributions
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]


def _env() -> tuple[list[str], list[str]]:
    """The env file's conda dependencies and its pip list."""
    deps = yaml.safe_load((REPO / "envs" / "fedrepro.yaml").read_text())["dependencies"]
    pip = [d["pip"] for d in deps if isinstance(d, dict)]
    assert len(pip) == 1, "expected one `pip:` list in envs/fedrepro.yaml"
    return [d for d in deps if isinstance(d, str)], pip[0]


def test_env_pins_match_pyproject():
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    conda, pip = _env()
    assert sorted(pip) == sorted(project["dependencies"])
    deploy = (REPO / "envs" / "fedrepro.post-deploy.sh").read_text()
    assert "pip install --no-deps" in deploy and "-e " not in deploy  # the package, not editable
    floor = project["requires-python"].removeprefix(">=")
    assert f"python={floor}" in conda


def _name(requirement: str) -> str:
    return re.split(r"[\[=<>!~ ]", requirement, maxsplit=1)[0].lower().replace("_", "-")


def test_every_package_the_library_imports_is_declared():
    """Pillow and MarkupSafe were imported (image parsers, report templates) but came only
    as other packages' dependencies."""
    declared = {_name(r) for r in tomllib.loads((REPO / "pyproject.toml").read_text())
                ["project"]["dependencies"]}  # fmt: skip
    modules = set()
    for path in (REPO / "src" / "fedrepro").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                modules |= {a.name.split(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                modules.add(node.module.split(".")[0])
    third_party = modules - set(sys.stdlib_module_names) - {"fedrepro"}
    owners = packages_distributions()
    undeclared = {
        m: owners.get(m) for m in third_party
        if not {_name(d) for d in owners.get(m, [m])} & declared
    }  # fmt: skip
    assert undeclared == {}

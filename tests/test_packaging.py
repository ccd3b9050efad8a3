"""The conda environment (envs/fedrepro.yaml) pins exactly what pyproject.toml pins."""

from __future__ import annotations

import tomllib
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

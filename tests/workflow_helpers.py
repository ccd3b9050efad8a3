"""Run Snakemake as a user would (a subprocess in a copy of the workflow), or one of its
scripts as its rule does."""

from __future__ import annotations

import os
import runpy
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


def env() -> dict:
    e = dict(os.environ)
    e["PATH"] = f"{BIN}{os.pathsep}{e.get('PATH', '')}"
    return e


def snakemake(*args: str, cwd: Path = REPO, timeout: int = 900) -> subprocess.CompletedProcess:
    cmd = [str(BIN / "snakemake"), *args]
    return subprocess.run(cmd, cwd=cwd, env=env(), capture_output=True, text=True, timeout=timeout)


def script_exit(monkeypatch, script: str, *args: str) -> str:
    """The message ``workflow/scripts/<script>`` exits with, run with ``args`` in this process
    as its rule runs it (so what a test patched in the library is the script's too)."""
    monkeypatch.setattr(sys, "argv", [script, *args])
    with pytest.raises(SystemExit) as exc:
        runpy.run_path(str(REPO / "workflow" / "scripts" / script), run_name="__main__")
    return str(exc.value)


def copy_workflow(dest: Path) -> Path:
    """A private copy of everything the workflow reads, so tests never touch results/.

    The library itself (schemas included) is imported from the environment.
    """
    names = ("Snakefile", "workflow", "config", "report", "profiles", "envs", "docs")
    dest.mkdir(parents=True, exist_ok=True)
    for name in names:
        src = REPO / name
        if src.is_dir():
            shutil.copytree(src, dest / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(src, dest / name)
    return dest

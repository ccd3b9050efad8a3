"""The environment is one lock file: requirements.lock pins every package with its hashes and
holds pyproject.toml's pins, the README's commands install it, and the conda environment
(envs/fedrepro.yaml) lists the same pins; its jobs import the library as the repository holds
it. pyproject.toml declares every package the library imports."""

from __future__ import annotations

import ast
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tomllib
from importlib.metadata import distributions, packages_distributions
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
LOCK = REPO / "requirements.lock"


def _env() -> tuple[list[str], list[str]]:
    """The env file's conda dependencies and its pip list."""
    deps = yaml.safe_load((REPO / "envs" / "fedrepro.yaml").read_text())["dependencies"]
    pip = [d["pip"] for d in deps if isinstance(d, dict)]
    assert len(pip) == 1, "expected one `pip:` list in envs/fedrepro.yaml"
    return [d for d in deps if isinstance(d, str)], pip[0]


def _name(requirement: str) -> str:
    """The name as PEP 503 normalises it (`ruamel.yaml` and `ruamel-yaml` are one package)."""
    return re.sub(r"[-_.]+", "-", re.split(r"[\[=<>!~ ]", requirement, maxsplit=1)[0].lower())


def _pin(requirement: str) -> str:
    """`name==version`, the name normalised and any extras dropped."""
    return f"{_name(requirement)}=={requirement.split('==', 1)[1].strip()}"


def _lock() -> dict[str, list[str]]:
    """requirements.lock: each pin with its hashes."""
    pins: dict[str, list[str]] = {}
    for line in LOCK.read_text().replace("\\\n", " ").splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            requirement, *options = line.split("--hash=")
            pins[_pin(requirement)] = [o.strip() for o in options]
    return pins


def test_lock_holds_pyproject_pins_with_hashes():
    """The lock pins every package (the direct ones as pyproject pins them) and each pin
    carries its hashes, so that `pip install --require-hashes` takes nothing else."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    direct = project["dependencies"] + project["optional-dependencies"]["dev"]
    lock = _lock()
    assert {_pin(r) for r in direct} - set(lock) == set()
    assert [p for p, hashes in lock.items() if not hashes or "==" not in p] == []
    assert all(h.startswith("sha256:") for hashes in lock.values() for h in hashes)


def test_environment_is_the_lock():
    """The venv the tests run in holds exactly the locked packages (besides pip and fedrepro
    itself): the lock is complete, nothing came from elsewhere."""
    installed = {_pin(f"{d.metadata['Name']}=={d.version}") for d in distributions()}
    installed -= {p for p in installed if _name(p) in {"pip", "fedrepro"}}
    assert sorted(installed ^ set(_lock())) == [], "rebuild: rm -r .venv && make test"


def test_make_installs_from_the_lock():
    """Both README commands (`make default`, `make test`) build the venv from the lock, with
    hashes, and add the package editable without dependencies."""
    recipe = subprocess.run(
        ["make", "-n", "-B", "-f", REPO / "Makefile", ".venv/.installed"],
        cwd=REPO, capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    installs = [line for line in recipe.splitlines() if " install " in line]
    assert installs[1:] == [
        ".venv/bin/pip install --quiet --require-hashes -r requirements.lock",
        ".venv/bin/pip install --quiet --no-deps --no-build-isolation -e .",
    ]


def test_conda_env_pins_equal_the_lock():
    """envs/fedrepro.yaml lists the lock's pins, all of them (Snakemake keys the env on this
    file, so a changed lock rebuilds it), and Python at pyproject's floor."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    conda, pip = _env()
    assert [_pin(p) for p in pip] == list(_lock())
    floor = project["requires-python"].removeprefix(">=")
    assert f"python={floor}" in conda


def test_conda_jobs_import_the_library_as_it_is_now(tmp_path):
    """The post-deploy script installs the package editable: a library change made after the
    env was built is in effect in the env's next job. Run as Snakemake runs it, a copy beside
    the env, in the repository, with a venv standing in for the conda env (no conda here):
    the locked packages of this venv, linked in, fedrepro left out."""
    repo = tmp_path / "repo"
    shutil.copytree(REPO / "src", repo / "src", ignore=shutil.ignore_patterns("*.egg-info"))
    shutil.copytree(REPO / "envs", repo / "envs")
    shutil.copy(REPO / "pyproject.toml", repo)
    env = tmp_path / "conda" / "0123abcd"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", env], check=True)
    locked = tmp_path / "locked"
    locked.mkdir()
    site = Path(sysconfig.get_paths()["purelib"])
    for entry in site.iterdir():
        if not entry.name.startswith(("fedrepro", "__editable__")) and entry.suffix != ".pth":
            (locked / entry.name).symlink_to(entry)
    (Path(sysconfig.get_paths(vars={"base": env})["purelib"]) / "locked.pth").write_text(
        f"{locked}\n"
    )
    deploy = tmp_path / "conda" / "0123abcd.post-deploy.sh"
    shutil.copy(REPO / "envs" / "fedrepro.post-deploy.sh", deploy)
    environ = {k: v for k, v in os.environ.items() if k not in {"PYTHONPATH", "VIRTUAL_ENV"}}
    environ["PATH"] = f"{env / 'bin'}{os.pathsep}{environ['PATH']}"  # as `conda activate`
    subprocess.run(["bash", deploy], cwd=repo, env=environ, check=True, capture_output=True)

    init = repo / "src" / "fedrepro" / "__init__.py"
    init.write_text(init.read_text() + "LIBRARY_CHANGED_AFTER_DEPLOY = True\n")
    job = [
        env / "bin" / "python",
        "-c",
        "import fedrepro; print(fedrepro.LIBRARY_CHANGED_AFTER_DEPLOY)",
    ]
    out = subprocess.run(job, cwd=tmp_path, env=environ, capture_output=True, text=True)
    assert (out.returncode, out.stdout.strip()) == (0, "True"), out.stderr


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

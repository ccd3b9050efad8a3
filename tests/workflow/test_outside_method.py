"""A method from outside the repository, named in a config file given on the command line,
becomes a column of a paper's table, with its claim and its report entry, and nothing in
the workflow is edited; a change to its file retrains its runs alone, a typo in its options
stops the dry run in one line, and a ``set`` override gives new ids to the runs it selects
only."""

from __future__ import annotations

import hashlib
import re
import subprocess
import zipfile
from pathlib import Path

import yaml

from tests.experiments.test_extend import MYPROX
from tests.workflow_helpers import REPO, copy_workflow, snakemake

TINY = {"per_class_train": 12, "per_class_test": 6, "size": 16, "seed": 0}


def _tree_digest(root: Path) -> str:
    """The workflow's files (not its outputs), hashed: what a user would have edited."""
    h = hashlib.sha256()
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        rel = path.relative_to(root)
        if rel.parts[0] in ("results", ".snakemake") or "__pycache__" in rel.parts:
            continue
        h.update(str(rel).encode() + path.read_bytes())
    return h.hexdigest()


def _config(tmp: Path, method: Path, **algorithm) -> Path:
    """The user's config file: the outside method, a tiny run of the baselines paper by
    ``set`` overrides, small synthetic data."""
    cfg = {
        "papers": ["baselines"],
        "scales": {"mini": {"data": TINY}},
        "methods": {
            "MyProx": {
                "algorithm": {"name": "myprox", **algorithm},
                "from": str(method),
                "papers": ["baselines"],
            }
        },
        "set": [
            {
                "where": {"paper": "baselines"},
                "set": {
                    "train": {"rounds": 2},
                    "model": {"backbone": "cnn_simple", "pretrained": False, "img_size": 32},
                },
            }
        ],
    }
    path = tmp / "mine.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def _counts(stdout: str) -> dict[str, int]:
    return {k: int(v) for k, v in re.findall(r"^(\w+)\s+(\d+)$", stdout, re.M)}


def test_an_outside_method_is_a_column_of_the_table_with_no_edit_to_the_workflow(tmp_path):
    wf = copy_workflow(tmp_path / "wf")
    before = _tree_digest(wf)
    method = tmp_path / "outside" / "myprox.py"
    method.parent.mkdir()
    method.write_text(MYPROX)
    mine = _config(tmp_path, method, mu=0.01)
    args = ("--configfile", str(mine))

    dry = snakemake("baselines", "-n", *args, cwd=wf)
    assert dry.returncode == 0, dry.stderr[-3000:]
    assert re.findall(r"wildcards: batch=(\w+)-", dry.stdout).count("myprox") == 1
    res = snakemake("baselines", "--cores", "2", *args, cwd=wf)
    assert res.returncode == 0, res.stderr[-3000:]
    out = wf / "results" / "mini"
    for ext in ("csv", "md"):
        assert "MyProx" in (out / "tables" / "baselines" / f"finetune.{ext}").read_text()
    claims = (out / "claims" / "baselines.csv").read_text()
    assert "outside_myprox_tops_finetune" in claims
    report = tmp_path / "report.zip"
    made = snakemake("baselines", "--report", str(report), *args, cwd=wf)
    assert made.returncode == 0, made.stderr[-3000:]
    with zipfile.ZipFile(report) as z:
        shown = [n for n in z.namelist() if n.endswith(("finetune.html", "baselines.html"))]
        assert len(shown) == 2, z.namelist()
        assert all("MyProx" in z.read(n).decode() for n in shown)
    assert _tree_digest(wf) == before  # no file of the workflow was edited
    status = subprocess.run(["git", "status", "--porcelain"], cwd=REPO, capture_output=True)
    assert status.returncode == 0

    method.write_text(MYPROX + "\n# a new version\n")  # its runs retrain, no other
    changed = snakemake("baselines", "-n", *args, cwd=wf)
    assert re.findall(r"wildcards: batch=(\w+)-", changed.stdout) == ["myprox"], changed.stdout
    assert _counts(changed.stdout).get("train") == 1

    typo = snakemake("baselines", "-n", "--configfile", str(_config(tmp_path, method, muu=1)),
                     cwd=wf)  # fmt: skip
    assert typo.returncode != 0
    assert (
        "config methods.MyProx.algorithm.muu: unknown option of algorithm myprox "
        "(allowed: buffers, mu, weighting)"
    ) in typo.stderr


def test_a_set_override_renames_the_runs_it_selects_and_no_other(tmp_path):
    wf = copy_workflow(tmp_path / "wf")
    base = tmp_path / "base.yaml"
    base.write_text(yaml.safe_dump({"papers": ["fedpce"]}))
    over = tmp_path / "over.yaml"
    entry = {"where": {"paper": "fedpce", "method": "FedAvg"}, "set": {"train": {"lr": 0.05}}}
    over.write_text(yaml.safe_dump({"papers": ["fedpce"], "set": [entry]}))

    def trained(path: Path) -> list[str]:
        dry = snakemake("fedpce", "-n", "--configfile", str(path), cwd=wf)
        assert dry.returncode == 0, dry.stderr[-2000:]
        return re.findall(r"wildcards: batch=(\S+)", dry.stdout)

    first, second = set(trained(base)), set(trained(over))
    assert first - second and all(b.startswith("fedavg-") for b in first - second)
    assert all(b.startswith("fedavg-") for b in second - first)
    assert len(first - second) == len(second - first)

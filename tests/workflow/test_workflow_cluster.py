"""What a cluster run needs of the workflow before any scheduler is involved: it parses where
Snakemake has no core count (the driver of a Slurm run), and parsing it does not import torch
(every Slurm job starts Snakemake twice, and each parses the workflow).
tests/workflow/test_slurm.py runs the workflow on a real one-node Slurm cluster."""

from __future__ import annotations

import re
import subprocess
import sys

from tests.workflow_helpers import REPO, env, snakemake


def test_a_cluster_driver_without_a_core_count_parses_and_plans_the_default(tmp_path):
    """`workflow.cores` raises where no `--cores` is given, as in every Slurm run: the bench
    rules read it at parse time and every real Slurm run died before its first job. `--summary`
    plans without submitting anything, so no Slurm is needed; `all` holds every bench rule."""
    res = snakemake("--executor", "slurm", "--jobs", "1", "--summary", "--config",
                    f"results={tmp_path}")  # fmt: skip
    assert res.returncode == 0, res.stderr[-2000:]
    assert "bench_budget" in res.stdout and "bench_workload" in res.stdout


def test_parsing_the_workflow_imports_no_torch():
    """torch costs a parse about 1.4 s and 700 MB (Snakemake's RSS: 860 MB with it, 144 MB
    without), twice in every Slurm job; the jobs' own scripts import it."""
    res = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "snakemake", "--list-rules"],
        cwd=REPO, env=env(), capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert res.returncode == 0, res.stderr[-2000:]
    imported = {line.rsplit("|", 1)[1].strip()
                for line in res.stderr.splitlines() if line.startswith("import time:")}  # fmt: skip
    assert "fedrepro.experiments.plan" in imported  # the workflow was parsed
    assert not {m for m in imported if m.split(".")[0] == "torch"}


def test_every_rule_that_can_run_as_a_slurm_job_declares_its_memory_and_time(tmp_path):
    """Without mem_mb and runtime a Slurm job gets Snakemake's default 1,000 MB and no attempt
    factor: partitions and data jobs were killed for memory on every attempt. Each job of the
    default but the local rules (the targets, the probe table) declares both, from the plan
    (config `scales.<scale>.resources`, times the attempt)."""
    res = snakemake("-n", "--executor", "slurm", "--jobs", "1", "--config", f"results={tmp_path}")
    assert res.returncode == 0, res.stderr[-2000:]
    undeclared = set()
    for block in re.split(r"\n(?=(?:local)?rule \w+:)", res.stdout):
        head = re.match(r"(?:local)?rule (\w+):", block)
        resources = re.search(r"^\s+resources: (.*)$", block, re.M)
        if head and not re.search(r"\bruntime=\d+.*\bmem_mb=\d+|\bmem_mb=\d+.*\bruntime=\d+",
                                  resources[1]):  # fmt: skip
            undeclared.add(head[1])
    assert undeclared == {"all", "probe_table"}

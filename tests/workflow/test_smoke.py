"""The paper-shape smoke (config/smoke.yaml over config/paper.yaml) runs end to end as the GPU
check on the CPU (config/gpu_check.yaml, `snakemake gpu_check`): every (algorithm, backbone,
tuning, adaptation) combination of the five paper grids trains or adapts at its paper-scale
model, image size and class count, on synthetic data, and every paper-scale item builder and
claims page runs on the results; every training and adaptation job runs under the GPU
discipline's checks (``fedrepro.discipline``): no op without a deterministic CUDA kernel, no
draw off its generator's device or moved to it, and no host synchronisation inside a training
step (the per-phase counts are ``results/smoke/paper/discipline/<id>.json``); and the check's
own jobs run: the cheapest jobs run twice and compared, one killed and resumed, the cheapest
run families' steps timed at the paper's batch (a GPU runs them all), and `calibrate` writes
those step times alone. About 16 minutes on 2
cores, the check's own jobs under a minute of it."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from fedrepro.cost.work import measured_steps
from fedrepro.discipline import unexplained_waits
from fedrepro.experiments.config import load_yaml
from fedrepro.experiments.items import ITEM_KINDS
from fedrepro.experiments.plan import paper_plan
from tests.workflow_helpers import copy_workflow, snakemake

pytestmark = pytest.mark.smoke

# the check's own jobs at their cheapest on a CPU (config/gpu_check.yaml checks every job)
ON_CPU = """device: cpu
gpu_check:
  repeat: 3
  resume: true
  step_time: {families: 3, warmup: 1, timed: 2}
"""


def test_paper_shape_smoke_runs_every_combination_and_builds_every_item(tmp_path):
    wf = copy_workflow(tmp_path)
    (wf / "on_cpu.yaml").write_text(ON_CPU)
    smoke = load_yaml(wf / "config/smoke.yaml")
    root = wf / smoke["results"] / "paper"
    checked = root / "discipline"
    files = ("config/paper.yaml", "config/smoke.yaml", "config/gpu_check.yaml", "on_cpu.yaml")
    res = snakemake("gpu_check", "calibrate", "--cores", "2", "--configfile", *files, cwd=wf,
                    timeout=3600)  # fmt: skip
    assert res.returncode == 0, res.stderr[-4000:]
    summary = json.loads((root / "gpu_check/summary.json").read_text())
    assert summary["passed"], summary
    assert (root / "gpu_check.md").read_text().startswith("# GPU check: PASSED")
    with open(root / "gpu_check/step_times.csv") as fh:
        steps = list(csv.DictReader(fh))
    assert len(steps) == 3 and all(float(r["step_ms"]) > 0 for r in steps)
    # `calibrate`: the same step times alone, the table the cost model reads (paper.yaml)
    calibration = root / "gpu_check/calibration.csv"
    assert calibration.read_text() == (root / "gpu_check/step_times.csv").read_text()
    assert len(measured_steps(calibration)) == 3
    resumed = json.loads((root / "gpu_check/resume.json").read_text())
    assert resumed["killed_after_checkpoint"] and resumed["identical"], resumed

    plan = paper_plan(wf, smoke=smoke["smoke"], results=str(wf / smoke["results"]))
    assert plan.covered and plan.runs
    for rid in plan.runs:
        metrics = json.loads(Path(plan.path(f"runs/{rid}/metrics.json")).read_text())
        assert metrics["peak_rss_mb"] > 0, rid
        assert (
            json.loads(Path(plan.path(f"runs/{rid}/config.json")).read_text())["scale"] == "paper"
        )
    for aid in plan.adapts:
        metrics = json.loads(Path(plan.path(f"adapt/{aid}/metrics.json")).read_text())
        assert metrics["peak_rss_mb"] > 0, aid
    reports = {p.stem: json.loads(p.read_text()) for p in checked.glob("*.json")}
    assert set(reports) == set(plan.runs) | set(plan.adapts)
    for rid, report in reports.items():
        adapt = plan.adapts.get(rid)
        run = plan.runs[adapt["run"] if adapt else rid]
        assert not unexplained_waits(report, run, adapt and adapt["adapt"]), (rid, report)
    for name, manifest in plan.items.items():
        kind = ITEM_KINDS[manifest["kind"]]
        paper, item = name.split("/")
        for ext in kind.outputs:
            assert Path(plan.path(f"{kind.folder}/{paper}/{item}.{ext}")).stat().st_size > 0
    for paper in plan.claims:
        assert Path(plan.path(f"claims/{paper}.html")).stat().st_size > 0

"""The paper-shape smoke (config/smoke.yaml over config/paper.yaml) runs end to end: every
(algorithm, backbone, tuning, adaptation) combination of the five paper grids trains or adapts
at its paper-scale model, image size and class count, on synthetic data, and every
paper-scale item builder and claims page runs on the results; and every training and
adaptation job runs under the GPU discipline's checks (``fedrepro.discipline``): no op without a
deterministic CUDA kernel, no draw off its generator's device or moved to it, and no host
synchronisation inside a training step (the per-phase counts are
``results/smoke/paper/discipline/<id>.json``). About 15 minutes on 2 cores."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fedrepro.discipline import ENV
from fedrepro.experiments.config import load_yaml
from fedrepro.experiments.items import ITEM_KINDS
from fedrepro.experiments.plan import paper_plan
from tests.workflow_helpers import copy_workflow, snakemake

pytestmark = pytest.mark.smoke


def test_paper_shape_smoke_runs_every_combination_and_builds_every_item(tmp_path, monkeypatch):
    wf = copy_workflow(tmp_path)
    smoke = load_yaml(wf / "config/smoke.yaml")
    checked = wf / smoke["results"] / "paper" / "discipline"
    monkeypatch.setenv(ENV, str(checked))
    args = ("--configfile", "config/paper.yaml", "config/smoke.yaml")
    res = snakemake("--cores", "2", *args, cwd=wf, timeout=3600)
    assert res.returncode == 0, res.stderr[-4000:]

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
        assert not report["nondeterministic"], (rid, report)
        assert not report["generator_mismatch"] and not report["moved_draws"], (rid, report)
        waits = {(phase, op) for phase in ("data", "step") for op in report["syncs"].get(phase, {})}
        assert waits <= _still_waiting(plan, rid), (rid, report)


def _still_waiting(plan, rid: str) -> set[tuple[str, str]]:
    """What a training step still waits for, by run family, each for a reason
    (docs/gpu.md, "What a step still waits for"); nothing else may appear."""
    adapt = plan.adapts.get(rid)
    run = plan.runs[adapt["run"] if adapt else rid]
    allowed = set()
    if adapt and adapt["adapt"]["method"] == "eata":  # the step is skipped when none is selected
        allowed.add(("step", "index (boolean mask)"))
    if run["partition"]["scheme"] == "fedpce_degradation":  # torchvision's adjust_hue
        allowed.add(("data", "lift_fresh"))  # builds its index table from Python values
    return allowed
    for name, manifest in plan.items.items():
        kind = ITEM_KINDS[manifest["kind"]]
        paper, item = name.split("/")
        for ext in kind.outputs:
            assert Path(plan.path(f"{kind.folder}/{paper}/{item}.{ext}")).stat().st_size > 0
    for paper in plan.claims:
        assert Path(plan.path(f"claims/{paper}.html")).stat().st_size > 0

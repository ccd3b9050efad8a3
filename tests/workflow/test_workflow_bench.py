"""`snakemake bench` end to end at a tiny size: every result, figure and the summary page."""

from __future__ import annotations

import json

import yaml

from tests.workflow_helpers import copy_workflow, snakemake

TINY = {"samples": 200, "test": 50, "rounds": 2, "matmul_n": 128}


def test_bench_target_writes_results_figures_and_summary(tmp_path):
    wf = copy_workflow(tmp_path)
    bench = yaml.safe_load((wf / "config/config.yaml").read_text())["bench"]
    workloads = {name: {**w, **TINY} for name, w in bench["workloads"].items()}
    workloads["rounds"]["rounds"] = 4
    over = {
        "results": "out",
        "bench": {
            "workloads": workloads,
            "clients": {"spec": {**bench["clients"]["spec"], **TINY}, "counts": [2, 4]},
            "dag": {"targets": ["adapters_payload"]},
            "cost": {"papers": ["adapters"]},
        },
    }
    (wf / "tiny.yaml").write_text(yaml.safe_dump(over))
    res = snakemake("bench", "--cores", "2", "--configfile", "tiny.yaml", cwd=wf)
    assert res.returncode == 0, res.stderr[-3000:]
    out = wf / "out" / "bench"
    for name in ("engine", "clients", "rounds", "dag", "cost"):
        assert (out / f"{name}.png").stat().st_size > 0 and (out / f"{name}.pdf").exists()
    summary = (out / "summary.md").read_text()
    for heading in ("Engine efficiency", "Memory", "Scaling with clients", "Scaling with rounds",
                    "Paper-scale DAG planning", "Cost of the paper scale"):  # fmt: skip
        assert f"## {heading}" in summary
    assert "no CUDA device" in summary or "NVIDIA" in summary
    cnn = json.loads((out / "workloads" / "cnn.json").read_text())
    assert cnn["spec"]["samples"] == 200 and 0 < cnn["mfu"] <= 1
    dag = json.loads((out / "dag.json").read_text())
    assert dag[0]["target"] == "adapters_payload" and dag[0]["jobs"] >= 1
    cost = json.loads((out / "cost.json").read_text())
    assert cost["papers_in_plan"] == ["adapters"] and cost["total_gpu_hours"] > 0

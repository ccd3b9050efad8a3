"""The GPU check (issue 51; docs/gpu.md): what it compares, what it picks, what it calls a
failure. The check itself runs in the paper-shape smoke's test (tests/workflow/test_smoke.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from fedrepro.bench.gpu_check import compare_dirs
from fedrepro.bench.gpu_check_page import write_page, write_steps
from fedrepro.bench.gpu_check_plan import DISCIPLINE, checked
from fedrepro.cost.work import WorkTable, known_sizes, measured_steps
from fedrepro.discipline import ENV, cuda_syncs, unexplained_waits
from fedrepro.experiments.config import load_yaml
from fedrepro.experiments.plan import paper_plan
from fedrepro.fl.data import DeviceData
from fedrepro.fl.eval_batch import eval_batch_size
from fedrepro.fl.local import predict
from tests.fl_helpers import TinyNet

REPO = Path(__file__).resolve().parents[2]


def _run_dir(path: Path, seconds: float, state: bytes) -> Path:
    path.mkdir(parents=True)
    metrics = {"final_acc": 50.0, "wall_seconds": seconds, "peak_rss_mb": seconds * 7,
               "seconds": {"setup": seconds}, "params": {"total": 10}}  # fmt: skip
    (path / "metrics.json").write_text(json.dumps(metrics))
    (path / "history.csv").write_text(f"round,acc,seconds\n1,50.0,{seconds}\n")
    (path / "state.safetensors").write_bytes(state)
    return path


def test_two_runs_that_differ_only_in_their_timings_are_identical(tmp_path):
    a = _run_dir(tmp_path / "a", 1.0, b"\x00\x01")
    b = _run_dir(tmp_path / "b", 2.5, b"\x00\x01")
    assert compare_dirs(a, b) == {"files": 3, "differ": [], "missing": []}


def test_a_trained_tensor_one_bit_off_or_a_missing_file_is_a_difference(tmp_path):
    a = _run_dir(tmp_path / "a", 1.0, b"\x00\x01")
    b = _run_dir(tmp_path / "b", 1.0, b"\x00\x03")
    (b / "metrics.json").write_text((b / "metrics.json").read_text().replace("50.0", "50.1"))
    (a / "extra.json").write_text("{}")
    found = compare_dirs(a, b)
    assert found["differ"] == ["metrics.json", "state.safetensors"]
    assert found["missing"] == ["extra.json"]


def test_the_workflow_names_the_discipline_variable_the_jobs_read():
    assert DISCIPLINE == ENV  # the planning side's copy (it cannot import torch)


def test_the_check_picks_the_cheapest_jobs_or_all_of_them():
    smoke = load_yaml(REPO / "config/smoke.yaml")["smoke"]
    plan = paper_plan(REPO, smoke=smoke, results="results/smoke")
    cost = load_yaml(REPO / "config/config.yaml")["bench"]["cost"]["split_sizes"]
    table = WorkTable(REPO / "config/flops/paper.json", known_sizes(cost))
    every = checked(plan, table, {"repeat": "all", "step_time": {"families": "all"}})
    assert set(every["repeat_train"]) == set(plan.train_jobs)
    assert set(every["repeat_adapt"]) == set(plan.adapt_jobs)
    assert set(every["steps"]) == set(plan.runs)
    few = checked(plan, table, {"repeat": 2, "step_time": {"families": 1}})
    assert few["repeat_train"] == every["repeat_train"][:2]  # cheapest first
    assert few["steps"] == every["steps"][:1]
    assert few["resume"] == every["repeat_train"][0]
    assert checked(plan, table, {"resume": False})["resume"] is None
    assert all(plan.paper_batch[r] >= plan.runs[r]["train"]["batch_size"] for r in plan.runs)


REPORT = {"nondeterministic": {}, "generator_mismatch": {}, "moved_draws": 0, "syncs": {}}
RUN = {"partition": {"scheme": "dirichlet"}}


def test_a_wait_in_a_step_fails_the_check_unless_the_family_is_allowed_it():
    waits = {**REPORT, "syncs": {"step": {"index (boolean mask)": 4}, "upload": {"item": 2}}}
    assert unexplained_waits(REPORT, RUN) == []
    assert unexplained_waits(waits, RUN) == ["step: index (boolean mask) x4"]
    assert unexplained_waits(waits, RUN, {"method": "eata"}) == []  # EATA's selection
    cuda = {**REPORT, "cuda_syncs": {"step": {"called a synchronizing CUDA operation": 3}}}
    assert unexplained_waits(cuda, RUN) == ["step (CUDA): called a synchronizing CUDA operation x3"]
    flagged = {**REPORT, "nondeterministic": {"aten.index_put": 1}, "moved_draws": 2}
    assert len(unexplained_waits(flagged, RUN)) == 2


def test_cuda_sync_counting_is_off_without_a_gpu():
    with cuda_syncs(True) as seen:
        torch.ones(3).sum().item()
    assert not seen


def test_the_page_fails_when_a_rerun_differs(tmp_path):
    (tmp_path / "discipline").mkdir()
    (tmp_path / "discipline" / "r1.json").write_text(json.dumps(REPORT))
    jobs = {"runs": {"r1": {"run": {**RUN, "model": {"backbone": "cnn"}, "algorithm":
                                    {"name": "fedavg"}}}}, "adapts": {}}  # fmt: skip
    step = {"run": "r1", "step_ms": 1.5, "batch": 32, "clients": 2, "device": "cpu",
            "device_name": "cpu", "steps_timed": 2, "peak_mb": None,
            "estimate_mb": 10.0}  # fmt: skip
    (tmp_path / "step.json").write_text(json.dumps(step))
    member = {"member": "r1", "differ": [], "missing": [], "files": 3}
    same = {"stage": "train", "identical": True, "members": [member]}
    off = {**same, "identical": False, "members": [{**same["members"][0], "differ": ["x"]}]}
    for name, record, passed in (("same", same, True), ("off", off, False)):
        (tmp_path / f"{name}.json").write_text(json.dumps(record))
        out = {k: tmp_path / f"{name}.{k}" for k in ("page", "steps", "summary")}
        got = write_page(out, str(tmp_path), [tmp_path / f"{name}.json"], [],
                         [tmp_path / "step.json"], jobs, {})  # fmt: skip
        assert got is passed
        assert (
            out["page"].read_text().startswith(f"# GPU check: {'PASSED' if passed else 'FAILED'}")
        )
        assert "1.50" in out["page"].read_text() and "r1" in out["steps"].read_text()
    # `snakemake calibrate`: the same table alone, which the cost model reads back
    alone = tmp_path / "calibration.csv"
    assert write_steps(str(alone), [tmp_path / "step.json"], jobs) == 1
    assert alone.read_text() == (tmp_path / "same.steps").read_text()
    assert measured_steps(alone) == {("fedavg", "cnn", "full", "", "32"): 0.0015}


@pytest.mark.parametrize("side", [224, 112])
def test_evaluation_in_the_smaller_default_batch_gives_identical_numbers(side):
    """The evaluation batch at 224 px went from 1,024 to 83 images (docs/gpu.md): every
    image's correctness and loss are the same bits in either batch."""
    gen = torch.Generator().manual_seed(0)
    n = 600
    labels = torch.randint(0, 3, (n,), generator=gen)
    images = (torch.rand(n, side, side, 3, generator=gen) * 255).to(torch.uint8)
    data = DeviceData(images, labels)
    model = TinyNet().eval()
    idx = torch.arange(n)
    small = eval_batch_size({}, side)
    assert small < n < 1024
    one = predict(model, data, idx, batch_size=1024)
    many = predict(model, data, idx, batch_size=small)
    assert torch.equal(one[0], many[0]) and torch.equal(one[1], many[1])

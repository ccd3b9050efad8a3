"""The embedded default's time budget per paper, from the jobs' records (bench budget)."""

from __future__ import annotations

import json
import os
import re
import threading
import time
from pathlib import Path

from fedrepro.bench.budget import budget, write_budget
from fedrepro.bench.driver import ENV, cancel_wakeups, driver, mark_driver

HEADER = "s\th:m:s\tmax_rss\tmax_vms\tmax_uss\tmax_pss\tio_in\tio_out\tmean_load\tcpu_time\n"


def _bench(root: Path, rel: str, seconds: float) -> None:
    path = root / "benchmarks" / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(HEADER + f"{seconds}\t0:00:01\t1\t1\t1\t1\t0\t0\t0\t{seconds}\n")


def _json(path: Path, doc: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc))


def _run(root: Path, rid: str, paper: str, wall: float) -> None:
    _json(root / "runs" / rid / "config.json", {"paper": paper})
    seconds = {"setup": 0.5, "train": wall - 2.0, "evaluate": 1.0, "write": 0.5}
    _json(root / "runs" / rid / "metrics.json", {"wall_seconds": wall, "seconds": seconds})


def _default(root: Path) -> None:
    """Paper `a`: a job of two runs (10 s each, 22 s wall) and an adaptation; paper `b`: a
    job of one run and a table; shared: a dataset."""
    for rid in ("ja-s0", "ja-s1"):
        _run(root, rid, "a", 10.0)
    _json(root / "runs" / "ja.json", {"runs": [{"run": "ja-s0"}, {"run": "ja-s1"}]})
    _bench(root, "train/ja.tsv", 22.0)
    _run(root, "jb-s0", "b", 30.0)
    _json(root / "runs" / "jb.json", {"runs": [{"run": "jb-s0"}]})
    _bench(root, "train/jb.tsv", 31.0)
    _json(root / "adapt" / "tent-ja-s0-1" / "config.json", {"run": "ja-s0"})
    seconds = {"setup": 1.0, "train": 1.0, "evaluate": 1.0}
    _json(
        root / "adapt" / "tent-ja-s0-1" / "metrics.json", {"wall_seconds": 3.0, "seconds": seconds}
    )
    _json(root / "adapt" / "tent-ja-1.json", {"runs": [{"run": "tent-ja-s0-1"}]})
    _bench(root, "adapt/tent-ja-1.tsv", 4.0)
    _bench(root, "items/b/table1.tsv", 2.0)
    _bench(root, "claims/a.tsv", 1.0)
    _bench(root, "data/cifar10.tsv", 6.0)


def test_each_job_counts_for_its_paper_and_the_papers_add_up_to_the_timed_run(tmp_path):
    _default(tmp_path)
    limits = {"paper_minutes": 0.25, "total_minutes": 1.0}
    out = budget(tmp_path, 2, limits, {"wall_seconds": 60.0, "cpu_seconds": 12.0})
    a, b, shared = (out["papers"][k] for k in ("a", "b", "shared"))
    assert (a["jobs"], a["runs"], b["jobs"], b["runs"], shared["jobs"]) == (3, 2, 2, 1, 1)
    assert a["seconds"] == 22 + 4 + 1 and b["seconds"] == 31 + 2 and shared["seconds"] == 6
    assert a["process start"] == (22 - 20) + (4 - 3) and b["process start"] == 1
    assert a["evaluation"] == 3.0 and a["set-up"] == 2 * 1.0 + 1.0
    # job seconds 66 over 2 cores is 33 s; the timed run took 60 s: every row scales by 60/33
    total = sum(p["minutes"] for p in out["papers"].values())
    assert abs(total - 1.0) < 1e-9 and abs(a["minutes"] - 27 / 66) < 1e-9
    assert a["within"] is False and b["within"] is False and shared["within"] is None
    assert out["within"] and abs(out["snakemake_share"] - 12 / 120) < 1e-9
    md, page = write_budget(tmp_path / "budget.json", out)
    text = md.read_text()
    assert "misses ≤ 0.25" in text and "meets ≤ 1.0 min" in text and "10.0% of the 2 cores" in text
    assert "<table" in page.read_text()


def test_without_a_timed_run_the_wall_time_is_the_job_seconds_over_the_cores(tmp_path):
    _default(tmp_path)
    out = budget(tmp_path, 2, {"paper_minutes": 6, "total_minutes": 25}, None)
    assert out["wall_seconds"] == 33.0 and out["papers"]["a"]["within"]
    md, _ = write_budget(tmp_path / "budget.json", out)
    assert "no timed run" in md.read_text()


def test_a_timed_run_that_ran_only_some_jobs_does_not_time_the_default(tmp_path):
    """A rerun after an edit runs only the jobs the edit touches: the Snakemake process that
    runs the budget then took seconds, and scaling every paper to it would report a default
    of 0.1 min that meets its budget (the old page did). Jobs whose benchmark files are older
    than the run's start are records of earlier runs: the wall time is then the estimate."""
    _default(tmp_path)
    started = 1_000_000.0
    for tsv in (tmp_path / "benchmarks").rglob("*.tsv"):
        os.utime(tsv, (started + 5, started + 5))  # every job ran in the timed run
    limits = {"paper_minutes": 0.25, "total_minutes": 0.5}
    timed = {"started": started, "wall_seconds": 40.0, "cpu_seconds": 2.0}
    whole = budget(tmp_path, 2, limits, timed)
    assert whole["earlier_jobs"] == 0 and whole["wall_seconds"] == 40.0
    for rel in ("train/ja.tsv", "train/jb.tsv", "data/cifar10.tsv"):
        os.utime(tmp_path / "benchmarks" / rel, (started - 600, started - 600))
    part = budget(tmp_path, 2, limits, {**timed, "wall_seconds": 6.0})
    # 66 job seconds over 2 cores, not the 6 s of the rerun
    assert (part["earlier_jobs"], part["jobs"], part["wall_seconds"]) == (3, 6, 33.0)
    assert not part["within"] and part["papers"]["b"]["within"] is False
    text = write_budget(tmp_path / "budget.json", part)[0].read_text()
    assert f"{33 / 60:.1f} min of wall time (misses ≤ 0.5 min), estimated as job" in text
    assert "ran 3 of the 6 jobs, the other 3 are records of earlier runs" in text


def test_the_benchmark_jobs_are_a_row_of_their_own_not_spread_over_the_papers(tmp_path):
    _default(tmp_path / "mini")
    bench = tmp_path / "bench"
    _bench(bench, "workloads/cnn.tsv", 20.0)  # _bench writes under <root>/benchmarks
    _bench(bench, "cost.tsv", 14.0)
    timed = {"wall_seconds": 50.0, "cpu_seconds": 1.0}
    out = budget(tmp_path / "mini", 2, {"paper_minutes": 6, "total_minutes": 25}, timed,
                 bench / "benchmarks")  # fmt: skip
    row = out["papers"]["bench"]
    assert (row["jobs"], row["seconds"], row["within"]) == (2, 34.0, None)
    # job seconds 100 over 2 cores is the timed 50 s: no scaling, paper a is its own 27 s
    assert out["job_seconds"] == 100.0 and abs(out["papers"]["a"]["minutes"] - 13.5 / 60) < 1e-9
    text = write_budget(tmp_path / "budget.json", out)[0].read_text()
    assert re.search(r"^\| bench +\|", text, re.MULTILINE)


def test_the_driver_is_the_process_that_marked_itself(monkeypatch):
    monkeypatch.delenv(ENV, raising=False)
    assert driver() is None
    mark_driver()
    sum(i * i for i in range(300_000))  # some CPU time of this process
    seen = driver()
    assert 0 <= seen["wall_seconds"] < 60 and seen["cpu_seconds"] > 0
    assert abs(seen["started"] + seen["wall_seconds"] - time.time()) < 5
    # a job on another host (a cluster node): that pid is not the driver there
    monkeypatch.setattr("socket.gethostname", lambda: "another-node")
    assert driver()["cpu_seconds"] is None


def test_pending_wake_ups_are_cancelled_so_the_process_can_exit_at_once():
    """The rate limiter's timers (non-daemon) would hold the interpreter's exit."""
    fired = []
    timer = threading.Timer(60, lambda: fired.append(1))
    timer.start()
    assert cancel_wakeups() >= 1
    timer.join(timeout=5)
    assert not timer.is_alive() and not fired


def test_a_cluster_run_without_a_core_count_uses_this_machines_cores(tmp_path, monkeypatch):
    """A cluster run's driver has no core count (`workflow.cores` raised in every Slurm run):
    the budget job takes the cores of the machine it runs on."""
    _default(tmp_path)
    monkeypatch.setattr("os.cpu_count", lambda: 3)
    out = budget(tmp_path, None, {"paper_minutes": 6, "total_minutes": 25}, None)
    assert out["cores"] == 3 and out["wall_seconds"] == 66.0 / 3


def _table(root: Path, paper: str, item: str, rows: list[tuple]) -> None:
    """An item's CSV as report.tables writes it: (dataset, method, mean, chance, paper)."""
    path = root / "tables" / paper / f"{item}.csv"
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = ["dataset,method,column,kind,n,mean,chance,text,paper_value"]
    lines += [f"{d},{m},{d},measured,1,{v},{c},{v},{p}" for d, m, v, c, p in rows]
    lines.append("CIFAR-10,,gap,diff,1,3.0,,3.0,4.0")  # a difference has no chance level
    path.write_text("\n".join(lines) + "\n")


def test_each_paper_row_counts_cells_against_chance_and_the_claims_that_hold(tmp_path):
    _default(tmp_path)
    _table(tmp_path, "b", "table1", [
        ("CIFAR-10", "FedAvg", 25.0, 10.0, 60.0),  # paper 6× chance, ours 2.5×: counts
        ("CIFAR-10", "Ours", 15.0, 10.0, 70.0),  # paper 7×, ours 1.5×: listed below
        ("CIFAR-100", "FedAvg", 1.5, 1.0, 2.5),  # paper 2.5×: not held to twice chance
        ("CIFAR-100", "Ours", 3.0, 1.0, ""),  # no paper value: counts among cells only
    ])  # fmt: skip
    claims = tmp_path / "claims" / "b.csv"
    claims.parent.mkdir(parents=True, exist_ok=True)
    claims.write_text("claim,holds_paper,holds_ours\nc1,True,True\nc2,True,False\n"
                      "c3,,True\nc4,False,False\n")  # fmt: skip
    out = budget(tmp_path, 2, {"paper_minutes": 6, "total_minutes": 25}, None)
    learning = out["papers"]["b"]["learning"]
    assert (learning["cells"], learning["cells_twice_chance"]) == (4, 2)
    assert (learning["reported_thrice"], learning["reported_thrice_ours_twice"]) == (2, 1)
    assert (learning["claims"], learning["claims_hold"]) == (4, 2)
    assert (learning["paper_claims"], learning["paper_claims_hold"]) == (2, 1)
    assert [b["cell"] for b in learning["below"]] == ["CIFAR-10 · Ours"]
    assert (
        out["papers"]["a"]["learning"]["cells"] == 0 and "learning" not in out["papers"]["shared"]
    )
    text = write_budget(tmp_path / "budget.json", out)[0].read_text()
    assert "2/4 (50%)" in text and "1/2 (50%)" in text
    assert re.search(r"\| b +\| table1 +\| CIFAR-10 · Ours +\| 15.0 ", text)


def test_a_paper_holding_claim_that_fails_here_needs_its_reason_in_the_method_notes(tmp_path):
    """Issue 35: every claim the paper's numbers hold and ours do not has its reason in
    docs/methods/<paper>.md; the budget page lists the ones the notes never name."""
    _default(tmp_path)
    claims = tmp_path / "claims" / "b.csv"
    claims.parent.mkdir(parents=True, exist_ok=True)
    claims.write_text("claim,holds_paper,holds_ours\nkept,True,True\nlost_a,True,False\n"
                      "lost_b,True,False\nnever,False,False\n")  # fmt: skip
    notes = tmp_path / "docs"
    notes.mkdir()
    # lost_b is named only inside a longer id, which does not count
    (notes / "b.md").write_text("- `lost_a`: at chance at mini.\n- `lost_b_variant`: ...\n")
    limits = {"paper_minutes": 6, "total_minutes": 25}
    out = budget(tmp_path, 2, limits, None, docs=notes)
    assert out["papers"]["b"]["learning"]["no_reason"] == ["lost_b"]
    assert out["papers"]["a"]["learning"]["no_reason"] == []  # no claims file: none lost
    text = write_budget(tmp_path / "budget.json", out)[0].read_text()
    assert re.search(r"\| b +\| lost_b +\|", text) and "lost_a |" not in text
    (notes / "b.md").unlink()  # no notes at all: every lost claim is unexplained
    out = budget(tmp_path, 2, limits, None, docs=notes)
    assert out["papers"]["b"]["learning"]["no_reason"] == ["lost_a", "lost_b"]
    assert budget(tmp_path, 2, limits, None)["papers"]["b"]["learning"]["no_reason"] is None

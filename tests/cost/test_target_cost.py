"""The cost of targets before they run (fedrepro.cost.target_cost): the jobs a target needs,
GPU-hours that agree with the paper cost's, the levers of arithmetic, the longest job against
a partition limit, downloads and weights; the command writes its page."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from fedrepro.cost import estimate as cost
from fedrepro.cost.target_cost import target_cost, target_items
from fedrepro.cost.work import WorkTable, known_sizes
from fedrepro.experiments.config import ConfigError, load_yaml
from fedrepro.experiments.plan import paper_plan

REPO = Path(__file__).resolve().parents[2]
SPLITS = load_yaml(REPO / "config/config.yaml")["bench"]["cost"]["split_sizes"]
PROFILE = REPO / "profiles/slurm/partitions.yaml"


@pytest.fixture(scope="module")
def plan():
    return paper_plan(REPO, ["fedins", "fedpce"])


@pytest.fixture(scope="module")
def table():
    return WorkTable(REPO / "config/flops/paper.json", known_sizes(SPLITS))


def test_targets_name_items_papers_or_everything(plan):
    assert target_items(plan, ["fedins_table1"]) == ["fedins/table1"]
    assert target_items(plan, ["fedpce"]) == [f"fedpce/{i}" for i in plan.papers["fedpce"]]
    assert len(target_items(plan, ["all"])) == len(plan.items)
    with pytest.raises(ConfigError, match=r"unknown target 'fedins_tabel1' \(allowed: all"):
        target_items(plan, ["fedins_tabel1"])


def test_an_items_gpu_hours_are_the_paper_costs_for_it(plan, table):
    """FedIns Table 1 trains its runs and adapts none: its GPU-hours are the sum the paper
    cost (fedrepro.cost.estimate.estimate) gives the item, and every job is counted once."""
    spec = {"papers": ["fedins"], "split_sizes": SPLITS, "goal_hours": 1}
    memo = cost.committed_memo(REPO / "config/flops/paper.json")
    estimate = cost.estimate(REPO, spec, memo=memo)
    mine = target_cost(plan, table, ["fedins_table1"], PROFILE)
    assert mine["items"]["fedins/table1"]["gpu_hours"] == pytest.approx(
        estimate["papers"]["fedins"]["by_item"]["table1"]
    )
    runs = {r["id"] for r in plan.items["fedins/table1"]["runs"]}
    assert mine["total"]["jobs"] == len({plan.job_of[r] for r in runs})
    total = mine["total"]
    assert total["bf16"] < total["gpu_hours"] and total["request_hours"] > total["gpu_hours"]


def test_a_paper_counts_a_job_its_items_share_once(plan, table):
    mine = target_cost(plan, table, ["fedpce"], PROFILE)
    summed = sum(t["jobs"] for t in mine["items"].values())
    assert mine["papers"]["fedpce"]["jobs"] == mine["total"]["jobs"] < summed


def test_the_longest_job_is_held_against_the_partitions_limit(plan, table, tmp_path):
    profile = tmp_path / "partitions.yaml"
    profile.write_text(yaml.safe_dump({"partitions": {"gpu": {"max_gpu": 1, "max_runtime": 60}}}))
    mine = target_cost(plan, table, ["fedins_table1"], profile)
    longest = mine["longest"]
    assert longest["limit_min"] == 60 and longest["over_limit"] == (longest["runtime_min"] > 60)
    assert mine["over_limit_jobs"] >= int(longest["over_limit"])
    # each job longer than the limit takes an attempt per limit's worth, each asking the limit
    assert longest["attempts"] == -(-longest["runtime_min"] // 60)
    assert target_cost(plan, table, ["fedins_table1"], PROFILE)["longest"]["limit_min"] == 2880
    unlimited = tmp_path / "unlimited.yaml"
    unlimited.write_text(yaml.safe_dump({"partitions": {"gpu": {"max_gpu": 1}}}))
    assert target_cost(plan, table, ["fedins_table1"], unlimited)["longest"]["limit_min"] is None


def test_downloads_and_weights_are_the_targets_own(plan, table):
    mine = target_cost(plan, table, ["fedins_table1"], PROFILE)
    names = {d["dataset"] for d in mine["downloads"]}
    assert {"domainnet", "tinyimagenet"} <= names and "svhn" not in names
    domainnet = next(d for d in mine["downloads"] if d["dataset"] == "domainnet")
    assert domainnet["download_bytes"] > 10 * 2**30 and domainnet["stage_by_hand"]
    assert mine["weights"] and all(w.startswith("vit_") for w in mine["weights"])


def test_the_command_prints_and_writes_the_page(tmp_path):
    out = tmp_path / "cost"
    res = subprocess.run(
        [sys.executable, str(REPO / "workflow/scripts/cost.py"), "fedpce_table3", "--out",
         str(out)],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert "| fedpce/table3 |" in res.stdout
    assert json.loads(Path(f"{out}.json").read_text())["targets"] == ["fedpce_table3"]
    bad = subprocess.run(
        [sys.executable, str(REPO / "workflow/scripts/cost.py"), "nope", "--out", str(out)],
        capture_output=True, text=True,
    )  # fmt: skip
    assert bad.returncode != 0 and bad.stderr.strip().startswith("cost: unknown target 'nope'")

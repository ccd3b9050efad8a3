"""FedIns's structural columns at paper scale: # Com.cost and #New.Param. from the engine."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
import yaml

from fedrepro.experiments.plan import build_plan
from fedrepro.report.parameters import make_parameter_table, printed_convention
from fedrepro.structure import measure_structure
from fedrepro.structure.parameters import count_parameters

REPO = Path(__file__).resolve().parents[2]
VIT_B = "vit_base_patch16_224.augreg_in21k_ft_in1k"


def _row(algorithm: dict, tuning: str = "full", **options) -> dict:
    model = {"tuning": tuning, "tuning_options": options}
    return count_parameters({"model": model, "algorithm": algorithm, "clients": 5}, VIT_B, 10)


def test_full_fine_tuning_sends_vit_b_with_a_10_class_head():
    fedavg = _row({"name": "fedavg"})
    assert fedavg == {"com_cost": 85_806_346, "aux": 0, "new_params": 0}
    # FedBN keeps the 25 LayerNorms' affine parameters (25 × 2 × 768) at home
    assert _row({"name": "fedbn"})["com_cost"] == 85_806_346 - 38_400
    # SCAFFOLD's control variates double what travels; the paper's column counts the model
    assert _row({"name": "scaffold"}) == {
        "com_cost": 85_806_346,
        "aux": 85_806_346,
        "new_params": 0,
    }
    assert _row({"name": "moon", "projection": "none"})["com_cost"] == 85_806_346
    assert _row({"name": "moon"})["com_cost"] > 85_806_346  # an MLP projection would be sent


def test_pools_prompts_and_merged_ssf():
    fedins = _row({"name": "fedins"}, "ssf_pool", pool_size=25, top_c=3)
    assert fedins == {"com_cost": 5_357_050, "aux": 0, "new_params": 5_164_800}
    assert _row({"name": "fedavg"}, "ssf")["new_params"] == 0  # merged at inference
    assert _row({"name": "fedavg"}, "vpt_deep", num_prompts=10)["new_params"] == 92_160
    pool = _row({"name": "fedins"}, "vpt_pool", num_prompts=10, pool_size=25, top_c=3)
    assert pool["new_params"] == 25 * 12 * 10 * 768 + 25 * 768 == 2_323_200


def test_printed_convention_tells_truncation_from_rounding():
    assert printed_convention(85.806346, "85.80") == "truncated"
    assert printed_convention(2.3232, "2.32") == "truncated = rounded"
    assert printed_convention(0.09985, "0.10") == "rounded"
    assert printed_convention(0.09216, "0.10") == "neither"


@pytest.fixture(scope="module")
def costs(tmp_path_factory) -> pd.DataFrame:
    config = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    plan = build_plan({**config, "papers": ["fedins"]}, REPO)
    tmp = tmp_path_factory.mktemp("costs")
    manifest = plan.items["fedins/costs"]
    manifest["structure"]["file"] = tmp / "structure.json"  # the structure job, then the table
    measure_structure(plan.structures[manifest["structure"]["id"]], tmp / "structure.json")
    out = tmp / "costs"
    make_parameter_table(manifest, out)
    assert "[paper 85.80]" in out.with_suffix(".md").read_text()
    return pd.read_csv(out.with_suffix(".csv"), keep_default_na=False)


def test_every_printed_value_matches_the_engine_count(costs: pd.DataFrame):
    rows = {(r.row, r.label) for r in costs.itertuples()}
    assert ("method", "SCAFFOLD") in rows and ("variation", "Prompt Pool") in rows
    for q in ("com_cost", "new_params"):
        printed = costs[costs[f"{q}_paper"] != ""]
        assert len(printed) >= 5
        assert printed[f"{q}_matches"].astype(str).eq("True").all(), printed
    table1 = costs[(costs["row"] == "method") & (costs["com_cost_paper"] != "")]
    assert set(table1["com_cost_convention"]) == {"truncated"}  # Table 1 truncates


def test_the_plan_and_the_structure_job_share_one_default_quantity_list():
    from fedrepro.experiments import items
    from fedrepro.structure import parameters

    assert items.DEFAULT_QUANTITIES == parameters.DEFAULT_QUANTITIES

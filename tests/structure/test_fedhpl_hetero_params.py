"""FedHPL part 2's structural numbers (App. C.1.2): the heterogeneous clients' models of
Tables 2, 7, 8 and 9, counted on the meta device from the shipped experiment file, beside the
printed values of config/reported/fedhpl_hetero.csv (docs/methods/fedhpl.md)."""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd
import pytest
import torch
import yaml

from fedrepro.experiments.config import ConfigError
from fedrepro.experiments.plan import _given_configs, build_plan
from fedrepro.models.registry import create_backbone
from fedrepro.models.server_models import server_model
from fedrepro.models.tuning import apply_tuning
from fedrepro.report.parameters import _headings, printed_number
from fedrepro.report.payload import matches_printed
from fedrepro.structure.parameters import count_federation, count_rows

REPO = Path(__file__).resolve().parents[2]
REPORTED = REPO / "config/reported/fedhpl_hetero.csv"
R18, R34, R50 = "resnet18.tv_in1k", "resnet34.tv_in1k", "resnet50.tv_in1k"
FRAME = {"tuning": "pad_prompt", "tuning_options": {"pad": 3, "size": 224, "outside": True,
                                                   "frozen": True}}  # fmt: skip


@pytest.fixture(scope="module")
def plan():
    config = yaml.safe_load((REPO / "config/config.yaml").read_text())
    return build_plan({**config, "papers": ["fedhpl"]}, REPO)


def _rows(plan, item: str) -> list[dict]:
    manifest = plan.items[f"fedhpl/{item}"]
    spec = plan.structures[manifest["structure"]["id"]]
    return count_rows(spec["configs"], spec["backbone"], spec["num_classes"],
                      tuple(spec["quantities"]))  # fmt: skip


def _printed(item_unit: str) -> dict[tuple[str, str, str], tuple[str, float]]:
    table = pd.read_csv(REPORTED, dtype=str, keep_default_na=False)
    return {
        (r.label, r.variant, r.quantity): printed_number(r.value, item_unit)
        for r in table.itertuples()
    }


@pytest.mark.parametrize(
    ("item", "unit", "expected"),
    [("table7", "Mi", 48), ("table8", "Ki", 12), ("table9_servers", "printed_binary", 6)],
)
def test_every_printed_count_of_tables_7_8_9_matches(plan, item, unit, expected):
    """Each method's reconstructed client (and server) model gives every printed digit."""
    printed = _printed(unit)
    checked = 0
    for row in _rows(plan, item):
        for quantity in plan.items[f"fedhpl/{item}"]["spec"]["quantities"]:
            key = (row["label"], row["variant"], quantity)
            if key not in printed:
                continue
            number, scale = printed[key]
            assert matches_printed(row[quantity] / scale, number), (key, row[quantity])
            checked += 1
    assert checked == expected


def test_table2_param_sums_over_the_five_clients(plan):
    """Exact sums match FedMD, FedHPL (CNN) and (ViT) (and FedGH within one unit); the
    paper's other sums are of Table 7's rounded entries, which ours reproduce too."""
    rows = {r["label"]: r["trainable"] for r in _rows(plan, "table2_params")}
    assert rows["FedHPL (ViT)"] == 2 * (3_850 + 12 * 3 * 384) + 2 * 35_338 + 10_250 + 24 * 3 * 1024
    assert rows["FedHPL (CNN)"] == 4 * (5_130 + 8_172) + 20_490 + 8_172
    assert rows["FedGen"] - rows["FedTGP"] == 531_456 - 530_432  # their server models
    printed = _printed("Mi")
    exact = {k: matches_printed(v / 2**20, printed[(k, _clients(k), "trainable")][0])
             for k, v in rows.items()}  # fmt: skip
    assert [k for k, ok in exact.items() if not ok] == ["FedGen", "FedProto", "FedTGP", "FedHE"]
    for method in ("FedGen", "FedGH", "FedProto", "FedTGP", "FedMD", "FedHE"):
        net = {v: round(c / 2**20, 3) for v, c in _table7(plan, method).items()}
        server = {"FedGen": 0.507, "FedTGP": 0.506}.get(method, 0.0)
        summed = 2 * net["ResNet-18"] + 2 * net["ResNet-34"] + net["ResNet-50"] + server
        assert f"{summed:.3f}" == printed[(method, _clients(method), "trainable")][0]


def _clients(label: str) -> str:
    return "ViT-S/B/L/B/S" if label == "FedHPL (ViT)" else "ResNet-18/34/50/34/18"


def _table7(plan, method: str) -> dict[str, int]:
    return {
        r["variant"].split(" · ")[0]: r["total"]
        for r in _rows(plan, "table7")
        if r["label"] == method and r["variant"].endswith("· 10 classes")
    }


@pytest.mark.parametrize(
    ("options", "added"),
    [
        ({"feature_dim": 512}, 5_130),  # FedGen, FedTGP: pooled to 512, no parameters
        ({"feature_dim": 512, "mapping": 2048}, 2048 * 512 + 5_130),  # FedProto
        ({"feature_dim": 512, "projection": "linear", "stem": 3}, 512 * 512 + 512 + 5_130 - 7_680),
        ({"projection": "none", "stem": 3, "public_classes": 10}, 2 * 5_130 - 7_680),  # FedMD
        ({"projection": "none", "stem": 3}, 5_130 - 7_680),  # FedHE: 3×3 stem saves 3·64·40
    ],
)
def test_head_split_adds_what_each_method_adds_to_resnet18(options, added):
    with torch.device("meta"):
        body = sum(p.numel() for p in create_backbone(R18, 0).parameters())
        model = apply_tuning(create_backbone(R18, 10), "head_split", **options)
    assert body == 11_176_512
    assert sum(p.numel() for p in model.parameters()) == body + added


def test_head_split_runs_and_gives_its_features_and_public_logits():
    torch.manual_seed(0)
    model = apply_tuning(create_backbone("resnet_mini", 10), "head_split", feature_dim=32,
                         mapping=256, stem=3, public_classes=4)  # fmt: skip
    x = torch.randn(2, 3, 16, 16)
    assert model(x).shape == (2, 10) and model.features(x).shape == (2, 32)
    assert model.forward_public(x).shape == (2, 4) and model.num_features == 32


def test_frame_outside_the_image_is_what_fedhpl_cnn_trains():
    """The 3-pixel frame around a 224 px image (230 px seen: 8,172 scalars, Table 8) on a
    frozen ResNet: frame and head are all that trains; the inside frame is unchanged."""
    with torch.device("meta"):
        model = apply_tuning(create_backbone(R50, 10), "pad_prompt", **FRAME["tuning_options"])
        inside = apply_tuning(create_backbone(R18, 10), "pad_prompt", pad=4, size=32)
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    assert trainable == 3 * (230**2 - 224**2) + 2048 * 10 + 10 == 8_172 + 20_490
    assert sum(p.numel() for n, p in inside.named_parameters() if "pad_" in n) == 1_344
    small = apply_tuning(create_backbone("resnet_mini", 10), "pad_prompt", pad=3, size=16,
                         outside=True, frozen=True)  # fmt: skip
    assert small(torch.randn(2, 3, 16, 16)).shape == (2, 10)
    assert small.frame().shape == (1, 3, 22, 22)


@pytest.mark.parametrize(
    ("name", "classes", "count"),
    [("generator", 10, 531_456), ("generator", 100, 577_536), ("prototypes", 10, 530_432),
     ("prototypes", 100, 576_512), ("global_head", 100, 51_300)],
)  # fmt: skip
def test_server_models_have_their_published_shapes(name, classes, count):
    with torch.device("meta"):
        model = server_model({"name": name}, classes)
    assert sum(p.numel() for p in model.parameters()) == count


def test_a_federation_counts_the_server_once():
    config = {"model": {"tuning": "head_split", "tuning_options": {"feature_dim": 512}},
              "algorithm": {"name": "fedavg"}, "server_model": {"name": "generator"}}  # fmt: skip
    counts = count_federation(config, [R18, R34, R50, R34, R18], 10, ("trainable", "server"))
    assert counts == {"server": 531_456, "trainable": 2 * 11_181_642 + 2 * 21_289_802
                      + 23_513_162 + 531_456}  # fmt: skip


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"configs": {"FedGen": {"modle": {}}}}, "configs.FedGen: unknown keys ['modle']"),
        ({"configs": {"FedGen": {"algorithm": {"name": "fedgenn"}}}}, "algorithm.name: 'fedgenn'"),
        (
            {"configs": {"FedGen": {"algorithm": {"name": "fedavg", "mu": 1}}}},
            "algorithm.mu: unknown option of algorithm fedavg",
        ),
        (
            {"configs": {"FedGen": {"server_model": {"name": "generatr"}}}},
            "FedGen.server_model.name: 'generatr' (allowed: generator, global_head, prototypes)",
        ),
    ],
)
def test_a_given_config_is_checked(change, message):
    with pytest.raises(ConfigError, match=re.escape(message)):
        _given_configs({"rows": "method", **change}, "items.x.sources[0]")


def test_an_item_may_name_a_quantity_s_column_as_its_table_does():
    """Table 8's trainable column is "head + frame (K)", not Table 1's "Param (M)"."""
    assert _headings({"headings": {"trainable": "head + frame (K)"}})["trainable"] == (
        "head + frame (K)"
    )
    assert _headings({})["trainable"] == "Param (M)"

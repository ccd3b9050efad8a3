"""Payload per round (adapters paper §IV-A4), from the real ResNet-26 and the engine's roles."""

from __future__ import annotations

import pandas as pd
import pytest
import torch

from fedrepro.algorithms import make_algorithm
from fedrepro.fl.payload import sent_state_dict, serialized_bytes
from fedrepro.fl.tensors import nbytes, take
from fedrepro.models.registry import create_backbone
from fedrepro.models.tuning import apply_tuning
from fedrepro.report.payload import make_payload_table, matches_printed
from fedrepro.structure import measure_structure
from fedrepro.structure.payload import measure_payload

PAPER = {  # §IV-A4, printed as "MB"
    "full model": "22.2",
    "full model with adapters": "24.7",
    "adapters + domain-specific": "2.58",
}


@pytest.fixture(scope="module")
def payload():
    return pd.DataFrame(measure_payload("resnet26", 10)).set_index("quantity")


def test_payload_matches_the_paper_in_mebibytes_not_megabytes(payload):
    for quantity, printed in PAPER.items():
        row = payload.loc[quantity]
        print(f"{quantity}: {row['MiB']:.3f} MiB, {row['MB']:.3f} MB (paper {printed} MB)")
        assert matches_printed(row["MiB"], printed)
        assert not matches_printed(row["MB"], printed)


def test_adapter_payload_counts_what_the_engine_sends(payload):
    sent = payload.loc["adapters + domain-specific"]
    # 645,216 adapter + 7,744 BN affine + 7,744 BN running + 2,570 FC + 26 counters
    assert sent["scalars"] == 663_300
    assert sent["engine_bytes"] == 4 * (663_300 - 26)  # float32, counters not averaged
    full = payload.loc["full model"]
    assert full["engine_bytes"] == 4 * (5_817_258 + 7_744)
    ratio = full["file_bytes"] / sent["file_bytes"]
    assert 8 < ratio < 9  # "lower the payload of each FL round by almost a ninth"


def test_matches_printed_uses_the_last_printed_digit():
    assert matches_printed(22.27, "22.2") and matches_printed(22.13, "22.2")
    assert not matches_printed(22.31, "22.2")
    assert matches_printed(2.576, "2.58") and not matches_printed(2.568, "2.58")


def test_sent_state_dict_drops_frozen_and_local_tensors():
    torch.manual_seed(0)
    model = apply_tuning(create_backbone("resnet26_mini", 10), "adapters")
    fedbn = make_algorithm({"name": "fedbn"})
    fedbn.setup(model, 2)
    sent = sent_state_dict(model, fedbn)
    assert not any(".conv.weight" in k and "parallel_conv" not in k for k in sent)
    assert not set(fedbn.local) & set(sent)
    assert any("parallel_conv" in k for k in sent)
    assert nbytes(take(model, fedbn.shared)) < serialized_bytes(sent)


def test_payload_table_files(tmp_path):
    spec = {"kind": "payload", "backbone": "resnet26_mini", "num_classes": 10}
    measure_structure({**spec, "algorithm": "fedavg"}, tmp_path / "structure.json")
    manifest = {
        "paper": "adapters",
        "item": "payload",
        "title": "payload",
        "spec": spec,
        "structure": {"id": "s", "file": str(tmp_path / "structure.json")},
    }
    paths = make_payload_table(manifest, tmp_path / "payload")
    assert sorted(p.suffix for p in paths) == [".csv", ".html", ".md", ".tex"]
    assert "adapters + domain-specific" in (tmp_path / "payload.md").read_text()

"""FedPCE's Table 1 parameter columns, counted from the paper-scale models the runs build."""

from __future__ import annotations

import pytest

from fedrepro.report.parameters import printed_number
from fedrepro.structure.parameters import count_parameters

PCE = {"tuning": "pce", "tuning_options": {"embed_dim": 32, "hidden": 64}}


@pytest.mark.parametrize(
    ("algorithm", "model", "backbone", "total", "local"),
    [
        ("fedavg", {}, "resnet18_in", 11_174_986, 0),
        ("fedprox", {}, "resnet18_in", 11_174_986, 0),
        ("fedper", {}, "resnet18_in", 11_174_986, 5_130),
        ("fedbn", {}, "resnet18_in", 11_174_986, 10_624),
        ("fedpce", PCE, "resnet18_in", 11_899_306, 32),
        ("fedpce", PCE, "resnet18_in62", 11_191_064, 32),
    ],
)
def test_collaborative_and_client_training_counts(algorithm, model, backbone, total, local):
    config = {"model": model, "algorithm": {"name": algorithm}, "clients": 24}
    counts = count_parameters(config, backbone, 10, ("total", "local"))
    assert counts == {"total": total, "local": local}


def test_fedpce_62_is_not_600k_larger_as_the_text_says():
    base = count_parameters({"model": {}, "algorithm": {"name": "fedavg"}}, "resnet18_in", 10)
    small = count_parameters(
        {"model": PCE, "algorithm": {"name": "fedpce"}}, "resnet18_in62", 10, ("total",)
    )
    assert 0 < small["total"] - 11_174_986 < 20_000  # +16,078, not "+600K"
    assert "total" not in base  # FedIns's quantities by default


def test_printed_values_carry_their_unit():
    assert printed_number("5.1K", "printed") == ("5.1", 1e3)
    assert printed_number("12M", "printed") == ("12", 1e6)
    assert printed_number("32", "printed") == ("32", 1.0)
    assert printed_number("85.80", "M") == ("85.80", 1e6)  # FedIns prints millions bare
    with pytest.raises(ValueError, match="unknown quantities"):
        count_parameters({"model": {}, "algorithm": {"name": "fedavg"}}, "resnet18_in", 10, ("x",))

"""FedPCE's claims on the paper's own numbers (config/reported/fedpce*.csv, the paper-scale
plan's items, the parameter counts of the paper-scale models): each holds, fails or is not
evaluable as its text says."""

from __future__ import annotations

from pathlib import Path

import pytest

from fedrepro.experiments.config import load_yaml
from tests.report.paper_claims import holds, paper_claims

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def paper_side(tmp_path_factory):
    frame = paper_claims("fedpce", tmp_path_factory.mktemp("structure"))
    return {claim: holds(frame, claim) for claim in frame.index}


NOT_EVALUABLE = {  # figures without printed numbers
    "fedpce_above_fedbn_with_few_images",
    "fedbn_ahead_beyond_800_images",
    "embeddings_cluster_by_degradation",
    "norm_vectors_cluster_by_degradation",
}


def test_fedavg_best_new_digits_fails_on_the_papers_numbers_as_its_text_says(paper_side):
    assert paper_side["fedavg_best_new_digits"] is False  # FedPer 92.16 > FedAvg 92.15
    doc = load_yaml(REPO / "config/experiments/fedpce.yaml")
    (text,) = [c["text"] for c in doc["claims"] if c["id"] == "fedavg_best_new_digits"]
    assert "Fails on the paper's own numbers: FedPer's 92.16 is above FedAvg's 92.15" in text


def test_fedpce62_below_fedpce_on_cifar100_fails_on_the_papers_numbers(paper_side):
    """§4.3's FedPCE(62) stands for "the performance does not stem from the extra number of
    parameters"; Table 1's CIFAR-100 client training has it 1.10 points below FedPCE (26.87
    vs 27.97), past the 1-point reading; the other five cells are within 0.35."""
    assert paper_side["fedpce62_keeps_fedpce_accuracy"] is False
    doc = load_yaml(REPO / "config/experiments/fedpce.yaml")
    (text,) = [c["text"] for c in doc["claims"] if c["id"] == "fedpce62_keeps_fedpce_accuracy"]
    assert "Fails on the paper's own numbers: CIFAR-100 client training 26.87 vs 27.97" in text


FAIL_ON_PAPER = {"fedavg_best_new_digits", "fedpce62_keeps_fedpce_accuracy"}


def test_the_other_claims_hold_on_the_papers_numbers_or_have_none(paper_side):
    for claim, verdict in paper_side.items():
        if claim in NOT_EVALUABLE:
            assert verdict is None, claim  # nothing printed
        elif claim not in FAIL_ON_PAPER:
            assert verdict is True, claim
    new = {
        "fedpce_below_fedbn_cifar100",
        "fedpce_trains_32_parameters_in_client_training",
        "fedbn_trains_332_times_more_in_client_training",
        "fedpce_above_fedbn_with_few_images",
        "fedbn_ahead_beyond_800_images",
        "fedpce62_keeps_fedpce_accuracy",
        "fedpce62_size_of_resnet18",  # Table 1 prints 11.2M for both: ratio 1
    }
    assert new <= set(paper_side)

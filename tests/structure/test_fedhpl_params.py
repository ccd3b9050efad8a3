"""FedHPL's Table 1 Param (M) column, counted from the paper-scale models (ViT-B/16, 10
classes) in the paper's unit M = 2^20 (docs/methods/fedhpl.md)."""

from __future__ import annotations

import pytest

from fedrepro.report.parameters import printed_number
from fedrepro.report.payload import matches_printed
from fedrepro.structure.parameters import count_parameters

VIT_B = "vit_base_patch16_224.augreg_in21k_ft_in1k"
PROMPTS = {"tuning": "vpt_deep", "tuning_options": {"num_prompts": 3}}


@pytest.mark.parametrize(
    ("algorithm", "model", "trainable", "printed"),
    [
        ({"name": "fedavg"}, {}, 85_806_346, "81.83"),
        ({"name": "scaffold"}, {}, 85_806_346, "81.83"),
        ({"name": "fedrep"}, {}, 85_806_346, "81.83"),
        ({"name": "fedbabu"}, {}, 85_798_656, "81.82"),  # the head is not trained
        ({"name": "fedhpl"}, PROMPTS, 7_690 + 12 * 3 * 768, "0.034"),
    ],
)
def test_trainable_counts_match_the_printed_param_column(algorithm, model, trainable, printed):
    config = {"model": model, "algorithm": algorithm, "clients": 5}
    counts = count_parameters(config, VIT_B, 10, ("trainable",))
    assert counts == {"trainable": trainable}
    number, scale = printed_number(printed, "Mi")
    assert scale == 2**20 and matches_printed(trainable / scale, number)


def test_an_unknown_unit_is_refused():
    with pytest.raises(ValueError, match="unit 'G'"):
        printed_number("1.0", "G")

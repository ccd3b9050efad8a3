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


@pytest.mark.parametrize(
    ("classes", "vit", "with_frame"), [(10, 1_076_106, "1.028"), (100, 1_087_716, "1.039")]
)
def test_pfedpt_vit_and_frame_match_table5(classes, vit, with_frame):
    """pFedPT's 32×32 ViT (Table 5 "ViT" 1.026 / 1.037) and its 4-pixel frame (G1 = 1,344
    scalars = 1.3125 K) together give F1 and Table 1's 1.028."""
    config = {"model": {"tuning": "pad_prompt", "tuning_options": {"pad": 4}},
              "algorithm": {"name": "pfedpt"}, "clients": 5}  # fmt: skip
    counts = count_parameters(config, "vit_pfedpt", classes, ("trainable", "com_cost"))
    assert counts == {"trainable": vit + 1_344, "com_cost": vit}  # the frame is never sent
    assert matches_printed(vit / 2**20, "1.026" if classes == 10 else "1.037")
    assert matches_printed((vit + 1_344) / 2**20, with_frame)


def test_pfedpg_counts_the_client_part_and_the_server_generator():
    """pFedPG: 10 shallow prompts and the head on the client (15,370 = F2 − G2 of Table 5),
    plus the server's generator (ours, so not Table 5's 1.512)."""
    config = {"model": {"tuning": "vpt_shallow", "tuning_options": {"num_prompts": 10}},
              "algorithm": {"name": "pfedpg"}, "clients": 5}  # fmt: skip
    counts = count_parameters(config, VIT_B, 10, ("trainable", "server", "aux"))
    assert counts["aux"] == 7_680  # the prompt update a client sends ("7.5 K")
    assert counts["trainable"] - counts["server"] == 7_680 + 7_690
    assert counts["server"] == 10 * 768 + 5 * 10 * 768 + 3 * (768 * 768 + 768)


def test_an_unknown_unit_is_refused():
    with pytest.raises(ValueError, match="unit 'G'"):
        printed_number("1.0", "G")

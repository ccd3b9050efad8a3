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


@pytest.mark.parametrize(
    ("upload", "classes", "printed"),
    [("all", 10, 11), ("all", 100, 101), ("average", 10, 110), ("average", 100, 10_100)],
)
def test_uploaded_scalars_match_table9(upload, classes, printed):
    """App. Table 9's FedHPL rows: all-upload sends a correct image's logit and label (C + 1,
    "weighted logits"), FedHPL+ (average-upload) per class the mean logit and the count
    (C·C + C); no model tensor is sent."""
    config = {"model": PROMPTS, "algorithm": {"name": "fedhpl", "upload": upload}, "clients": 5}
    counts = count_parameters(config, VIT_B, classes, ("uploaded", "com_cost"))
    assert counts == {"uploaded": printed, "com_cost": 0}


def test_an_unknown_unit_is_refused():
    with pytest.raises(ValueError, match="unit 'G'"):
        printed_number("1.0", "G")


VIT_S = "vit_small_patch16_224.augreg_in21k_ft_in1k"
VIT_L = "vit_large_patch16_224.augreg_in21k_ft_in1k"


@pytest.mark.parametrize(
    ("backbone", "classes", "body", "printed_body", "printed_total"),
    [
        (VIT_S, 100, 21_665_664, "20.66", "20.70"),
        (VIT_B, 100, 85_798_656, "81.82", "81.90"),
        (VIT_L, 10, 303_301_632, "289.25", "289.26"),
    ],
)
def test_backbone_and_entire_model_match_table5(
    backbone, classes, body, printed_body, printed_total
):
    """Table 5's Backbone and Entire Model columns (M = 2^20): the model without and with
    its classifier (width·classes + classes)."""
    config = {"model": {}, "algorithm": {"name": "fedavg"}, "clients": 5}
    counts = count_parameters(config, backbone, classes, ("backbone", "head", "total"))
    assert counts["backbone"] == body and counts["total"] == body + counts["head"]
    for value, printed in ((body, printed_body), (counts["total"], printed_total)):
        assert matches_printed(value / 2**20, printed)


@pytest.mark.parametrize(
    ("backbone", "tuning", "head", "per_prompt", "printed"),
    [
        (VIT_S, "vpt_shallow", 3_850, 384, ("3.76", "0.375")),
        (VIT_S, "vpt_deep", 3_850, 12 * 384, ("3.76", "4.5")),
        (VIT_B, "vpt_deep", 7_690, 12 * 768, ("7.51", "9")),
        (VIT_L, "vpt_deep", 10_250, 24 * 1024, ("10.01", "24")),
    ],
)
def test_fedhpl_head_and_per_prompt_match_table6(backbone, tuning, head, per_prompt, printed):
    """Table 6 prints FedHPL's trainable parameters as "head + c·n" (K = 2^10): the head and
    one prompt token per layer it enters; trainable = head + c·n for n = 3."""
    model = {"tuning": tuning, "tuning_options": {"num_prompts": 3}}
    config = {"model": model, "algorithm": {"name": "fedhpl"}, "clients": 5}
    counts = count_parameters(config, backbone, 10, ("head", "per_prompt", "trainable"))
    assert counts == {"head": head, "per_prompt": per_prompt, "trainable": head + 3 * per_prompt}
    assert matches_printed(head / 2**10, printed[0])
    assert matches_printed(per_prompt / 2**10, printed[1])


def test_a_k_suffix_counts_in_2_to_the_10_where_the_unit_is_binary():
    assert printed_number("1.3125K", "Mi") == ("1.3125", 2**10)
    assert printed_number("5.1K", "M") == ("5.1", 1e3)  # FedIns's decimal K
    assert printed_number("3.76", "Ki") == ("3.76", 2**10)

"""FedIns's intra-client style knob γ (data.styles): assignment and the pixel-space AdaIN."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from fedrepro.data.partitions.make import make_partition
from fedrepro.data.transforms.styles import (
    TEXTURE_WEIGHT,
    assign_styles,
    style_bank,
    stylize,
    stylize_split,
)

LABELS = np.random.default_rng(0).integers(0, 10, 600)


def test_gamma_styles_give_gamma_plus_one_equal_groups() -> None:
    ids = assign_styles(110, 10, np.random.default_rng(0))
    assert np.bincount(ids).tolist() == [10] * 11  # group 0 kept, groups 1..10 converted
    assert assign_styles(50, 0, np.random.default_rng(0)).tolist() == [0] * 50
    half = assign_styles(100, 4, np.random.default_rng(0), fraction=0.5)
    assert (half == 0).sum() == 50 and np.bincount(half)[1:].tolist() == [13, 13, 12, 12]


def test_partition_records_a_style_per_training_image_and_keeps_the_split() -> None:
    spec = {"scheme": "dirichlet", "variant": "niid", "clients": 5, "beta": 0.2}
    plain = make_partition(spec, LABELS, LABELS[:100], num_classes=10, seed=3)
    styled = make_partition({**spec, "styles": 6}, LABELS, LABELS[:100], num_classes=10, seed=3)
    for a, b in zip(plain["clients"], styled["clients"], strict=True):
        assert a["train"] == b["train"] and "style" not in a
        assert len(b["style"]) == len(b["train"]) and set(b["style"]) <= set(range(7))
    assert styled["params"]["styles"] == 6
    with pytest.raises(ValueError, match="'styles'"):
        make_partition({**spec, "styles": -1}, LABELS, LABELS[:100], num_classes=10, seed=3)


def test_stylize_sets_the_target_channel_statistics_and_leaves_style_zero_alone() -> None:
    x = torch.rand(4, 3, 16, 16, generator=torch.Generator().manual_seed(0)) * 0.5 + 0.2
    bank = style_bank(2)
    out = stylize(x, torch.tensor([0, 1, 2, 1]), bank)
    assert torch.equal(out[0], x[0])
    # before the texture blend the converted image has exactly the style's mean per channel
    texture_mean = bank["texture"][0].mean(dim=(1, 2))
    expected = (1 - TEXTURE_WEIGHT) * bank["mean"][0] + TEXTURE_WEIGHT * texture_mean
    assert torch.allclose(out[1].mean(dim=(1, 2)), expected, atol=0.03)
    # the same style maps different images to the same statistics; other styles differ
    assert torch.allclose(out[1].mean(dim=(1, 2)), out[3].mean(dim=(1, 2)), atol=0.02)
    assert not torch.allclose(out[1].mean(dim=(1, 2)), out[2].mean(dim=(1, 2)), atol=0.02)


def test_stylize_split_converts_only_the_assigned_images() -> None:
    images = torch.randint(0, 256, (6, 8, 8, 3), dtype=torch.uint8)
    part = {"clients": [{"train": [0, 2, 4], "style": [0, 1, 2]}, {"train": [1, 3, 5]}]}
    out = stylize_split(images, part)
    changed = [not torch.equal(out[i], images[i]) for i in range(6)]
    assert changed == [False, False, True, False, True, False]
    assert stylize_split(images, {"clients": [{"train": [0, 1]}]}) is images

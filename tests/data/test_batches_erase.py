"""FedPCE's augmentation (§5.1): flip with p 0.25, rotation with p 0.25, random erasing of a
16–256 px box with p 0.5 — measured on batches."""

from __future__ import annotations

import torch

from fedrepro.data.transforms.batches import augment, erase_boxes

N = 4000


def _gen(seed=0):
    return torch.Generator().manual_seed(seed)


def test_flip_and_rotation_happen_with_their_probabilities():
    x = torch.rand(N, 1, 8, 8)
    flipped = augment(x, _gen(), flip=True, flip_p=0.25)
    share = (flipped != x).flatten(1).any(1).float().mean().item()
    assert abs(share - 0.25) < 0.03
    rotated = augment(x, _gen(), rotate=150, rotate_p=0.25)  # large: every turn shows
    share = (rotated != x).flatten(1).any(1).float().mean().item()
    assert abs(share - 0.25) < 0.03


def test_erasing_zeroes_one_box_of_16_to_256_pixels_half_the_time():
    masks = erase_boxes(N, 32, 32, _gen(), p=0.5, scale=(16 / 1024, 256 / 1024))
    erased = masks.flatten(1).sum(1)
    assert abs((erased > 0).float().mean().item() - 0.5) < 0.03
    hit = erased[erased > 0]
    assert hit.min() >= 9 and hit.max() <= 300  # 16–256 px up to the rounding of the sides
    for m in masks[erased > 0][:50]:  # each is one solid rectangle
        rows, cols = m.any(1).nonzero().flatten(), m.any(0).nonzero().flatten()
        assert m.sum() == len(rows) * len(cols)
        assert len(rows) == int(rows[-1] - rows[0] + 1) and len(cols) == int(cols[-1] - cols[0] + 1)
    x = torch.ones(N, 3, 32, 32)
    out = augment(x, _gen(), erase={"p": 0.5, "scale": [16 / 1024, 256 / 1024]})
    assert torch.equal(out == 0, masks[:, None].expand_as(out))  # the same draws, zeros in boxes


def test_defaults_keep_the_old_stream():
    x = torch.rand(64, 3, 8, 8)
    assert torch.equal(
        augment(x, _gen(), 2, True, 10.0),
        augment(x, _gen(), 2, True, 10.0, "zeros", 0.5, 1.0, None),
    )

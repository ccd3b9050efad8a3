"""Contrastive view perturbations (fedrepro.data.transforms.views; FedICON §4.1.1): each image of a
batch gets its own draw, and each operation is torchvision's at that image's parameters."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
import torchvision.transforms.v2.functional as TF

from fedrepro.data.transforms.batches import augment, normalize, to_input
from fedrepro.data.transforms.views import (
    brightness_of,
    contrast_of,
    crop_boxes,
    hue_of,
    perturb,
    perturbs,
    resized_crops,
    saturation_of,
)
from fedrepro.fl.data import DeviceData
from tests.job_helpers import VIEWS


def _images(n=6, size=12, seed=0):
    x = torch.rand(n, 3, size, size, generator=torch.Generator().manual_seed(seed))
    x[0] = 0.5  # a grey image (no hue)
    x[1, :, :4] = 0.0  # black pixels
    return x


@pytest.mark.parametrize(
    ("ours", "theirs"),
    [
        (brightness_of, TF.adjust_brightness),
        (contrast_of, TF.adjust_contrast),
        (saturation_of, TF.adjust_saturation),
    ],  # fmt: skip
)
def test_each_blend_is_torchvisions_at_each_images_factor(ours, theirs):
    x, f = _images(), torch.tensor([0.0, 0.3, 0.6, 1.0, 1.4, 2.0])
    out = ours(x, f)
    for i in range(len(x)):
        assert torch.allclose(out[i], theirs(x[i], float(f[i])), atol=1e-6), i


def test_hue_is_torchvisions_at_each_images_shift():
    x, shift = _images(), torch.tensor([-0.5, -0.1, 0.0, 0.05, 0.3, 0.5])
    out = hue_of(x, shift)
    for i in range(len(x)):
        assert torch.allclose(out[i], TF.adjust_hue(x[i], float(shift[i])), atol=1e-5), i


def test_crop_boxes_fit_and_follow_the_area_and_ratio_ranges():
    boxes = crop_boxes(2000, 32, 24, torch.Generator().manual_seed(0), (0.2, 1.0), (0.75, 4 / 3))
    left, top, right, bottom = boxes.unbind(1)
    w, h = right - left, bottom - top
    assert bool((left >= 0).all() and (top >= 0).all() and (right <= 24).all())
    assert bool((bottom <= 32).all() and (w >= 1).all() and (h >= 1).all())
    area = w * h / (32 * 24)
    assert area.min() > 0.15 and area.max() <= 1.0 and 0.5 < area.mean() < 0.7
    log_ratio = (w / h).log()
    assert log_ratio.abs().max() < math.log(4 / 3) + 0.2  # rounding to whole pixels
    assert len({tuple(b.tolist()) for b in boxes}) > 1000  # per image


def test_a_resized_crop_is_the_bilinear_resize_of_its_box():
    x = _images()
    whole = torch.tensor([[0.0, 0.0, 12.0, 12.0]] * 6)
    assert torch.equal(resized_crops(x, whole), x)
    left_half = torch.tensor([[0.0, 0.0, 6.0, 12.0]] * 6)
    want = F.interpolate(x[..., :6], size=(12, 12), mode="bilinear", align_corners=False)
    # equal inside; at the box's edge the crop reads its neighbours instead of repeating
    assert torch.allclose(resized_crops(x, left_half)[..., 1:-1], want[..., 1:-1], atol=1e-6)


def test_views_differ_per_image_repeat_per_seed_and_apply_only_what_is_named():
    x = _images(n=16)
    a = perturb(x, torch.Generator().manual_seed(1), VIEWS)
    b = perturb(x, torch.Generator().manual_seed(2), VIEWS)
    again = perturb(x, torch.Generator().manual_seed(1), VIEWS)
    assert torch.equal(a, again) and not torch.equal(a, b)
    assert all(not torch.equal(a[i], b[i]) for i in range(16))
    assert a.min() >= 0 and a.max() <= 1
    assert torch.equal(perturb(x, None, {}), x)
    assert torch.equal(perturb(x, None, {"flip": 1.0}), TF.horizontal_flip(x))
    grey = perturb(x, None, {"grayscale": 1.0})
    assert torch.equal(grey, TF.rgb_to_grayscale(x, num_output_channels=3))
    with pytest.raises(ValueError, match="views: unknown perturbation"):
        perturb(x, None, {"blur": 1.0})


def test_a_view_takes_the_perturbations_in_place_of_the_training_augmentation():
    """FedICON's contrastive views are perturbed by ``views`` alone; its classifier batches
    (one view, no perturbation) take the run's training augmentation (crop_pad)."""
    images = (torch.rand(8, 12, 12, 3, generator=torch.Generator().manual_seed(0)) * 255).byte()
    data = DeviceData(images, torch.zeros(8, dtype=torch.long), crop_pad=2, views=VIEWS)
    idx = torch.arange(8)
    plain, _ = data.batch(idx)
    raw = to_input(images)
    view, _ = data.batch(idx, torch.Generator().manual_seed(3), train=True, view=True)
    want = normalize(perturb(raw, torch.Generator().manual_seed(3), VIEWS))
    assert torch.equal(view, want)
    twin = data.view_of(plain, torch.Generator().manual_seed(3))  # the online twin alike
    assert torch.allclose(twin, want, atol=1e-5)
    classifier, _ = data.batch(idx, torch.Generator().manual_seed(3), train=True)
    cropped = normalize(augment(raw, torch.Generator().manual_seed(3), crop_pad=2))
    assert torch.equal(classifier, cropped) and not torch.equal(classifier, plain)


@pytest.mark.parametrize("channels", [3, 1])
@pytest.mark.parametrize("noisy", [False, True])
def test_views_in_one_pass_equal_one_call_per_view(channels, noisy):
    """``views_batch`` perturbs all views at once from the draws the per-view calls make,
    in their order (a client transform's draws between them): the same inputs to the bit,
    and the generator left where the per-view calls leave it."""
    gen = torch.Generator().manual_seed(0)
    images = (torch.rand(10, 12, 12, channels, generator=gen) * 255).byte()
    data = DeviceData(images, torch.arange(10), channels=channels, views=VIEWS)
    idx = torch.tensor([7, 2, 5, 0, 9, 3])

    def transform(x, g):  # a client transform that draws from the batch's generator
        return (x + 0.1 * torch.rand(x.shape, generator=g)).clamp(0, 1) if noisy else x

    one, two = torch.Generator().manual_seed(5), torch.Generator().manual_seed(5)
    want = torch.cat([data.batch(idx, one, transform, True, True)[0] for _ in range(3)])
    got, labels = data.views_batch(idx, two, transform if noisy else None, 3)
    assert torch.equal(got, want) and torch.equal(labels, idx)
    assert torch.equal(one.get_state(), two.get_state())
    assert not torch.equal(got[:6], got[6:12])


@pytest.mark.parametrize(
    ("spec", "changes"),
    [
        (VIEWS, True),
        ({"crop": {}}, True),
        ({"flip": 0.5}, True),
        ({"jitter": {"brightness": 0.4}}, True),
        (None, False),
        ({}, False),
        ({"flip": 0}, False),
        ({"flip": 0, "grayscale": 0.0}, False),
        ({"jitter": {"p": 0.8}}, False),  # no factor
        ({"jitter": {"p": 0.0, "brightness": 0.4}}, False),
    ],
)
def test_a_spec_perturbs_with_a_crop_or_a_probability_above_zero(spec, changes):
    assert perturbs(spec) is changes

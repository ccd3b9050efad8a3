"""Per-client transforms: Gaussian noise, FedPCE noise and fixed-factor colour jitter."""

from __future__ import annotations

from itertools import permutations

import pytest
import torch
import torchvision.transforms.v2.functional as tvf

from fedrepro.data.transforms.clients import apply_transform

JITTER = {"kind": "color_jitter", "brightness": 1.3, "contrast": 0.7, "saturation": 1.4, "hue": 0.2}


def batch(n: int = 8, c: int = 3, seed: int = 0) -> torch.Tensor:
    return torch.rand(n, c, 12, 12, generator=torch.Generator().manual_seed(seed))


def gen(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def test_none_leaves_the_batch_unchanged() -> None:
    x = batch()
    assert apply_transform(x, None, gen()) is x


def test_gaussian_noise_has_the_given_std_no_clipping_and_is_fresh_per_call() -> None:
    x = batch(32)
    g = gen()
    first = apply_transform(x, {"kind": "gaussian_noise", "std": 0.3}, g)
    second = apply_transform(x, {"kind": "gaussian_noise", "std": 0.3}, g)
    assert float((first - x).std()) == pytest.approx(0.3, rel=0.03)
    assert float((first - x).mean()) == pytest.approx(0.0, abs=0.01)
    assert first.min() < 0 and first.max() > 1
    assert not torch.equal(first, second)
    again = apply_transform(x, {"kind": "gaussian_noise", "std": 0.3}, gen())
    assert torch.equal(first, again)  # same generator state, same noise


def test_fedpce_noise_is_added_on_the_min_max_scale() -> None:
    x = batch(32) * 0.5 + 0.25  # every image spans ~[0.25, 0.75]
    noisy = apply_transform(x, {"kind": "fedpce_noise", "var": 0.04}, gen())
    span = x.amax(dim=(1, 2, 3)) - x.amin(dim=(1, 2, 3))
    scaled_noise = (noisy - x) / span[:, None, None, None]
    assert float(scaled_noise.std()) == pytest.approx(0.2, rel=0.03)  # sqrt(var) on [0, 1]
    assert float((noisy - x).std()) == pytest.approx(0.2 * float(span.mean()), rel=0.05)
    zero = apply_transform(x, {"kind": "fedpce_noise", "var": 0.0}, gen())
    assert torch.allclose(zero, x, atol=1e-4)


def test_color_jitter_applies_the_fixed_factors_in_a_per_call_order() -> None:
    """torchvision's own ops to the bit (issue 32: the hand-written copies before differed by
    up to 1e-5), in an order redrawn per call and repeated under the same seed."""
    x = batch()
    ops = [
        lambda t: tvf.adjust_brightness(t, 1.3),
        lambda t: tvf.adjust_contrast(t, 0.7),
        lambda t: tvf.adjust_saturation(t, 1.4),
        lambda t: tvf.adjust_hue(t, 0.2),
    ]
    expected = {}
    for order in permutations(range(4)):
        y = x
        for i in order:
            y = ops[i](y)
        expected[order] = y
    g = gen()
    orders_seen = set()
    for _ in range(12):
        out = apply_transform(x, JITTER, g)
        matches = [order for order, y in expected.items() if torch.equal(out, y)]
        assert matches, "output is not any ordering of the four fixed adjustments"
        orders_seen.add(matches[0])
    assert len(orders_seen) > 1  # the order is redrawn per call
    first, second = gen(1), gen(1)  # the same seed: the same orders, call after call
    for _ in range(3):
        assert torch.equal(apply_transform(x, JITTER, first), apply_transform(x, JITTER, second))


def test_color_jitter_keeps_grayscale_batches_valid() -> None:
    x = batch(c=1)
    out = apply_transform(x, JITTER, gen())
    assert out.shape == x.shape and not torch.equal(out, x)


def test_unknown_kind_and_missing_factor_raise_naming_them() -> None:
    with pytest.raises(ValueError, match="'blur'"):
        apply_transform(batch(), {"kind": "blur"}, gen())
    with pytest.raises(ValueError, match="'std'"):
        apply_transform(batch(), {"kind": "gaussian_noise"}, gen())

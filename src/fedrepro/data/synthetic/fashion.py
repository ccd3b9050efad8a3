"""FashionMNIST-like gray clothing silhouettes: each class is a union of convex quads
(body, sleeves, legs, straps, handle) whose vertices, proportions, pose, shade and print
vary per image. Tops (T-shirt, pullover, coat, shirt) share a body and differ in sleeves
and details, so they are confused with each other as in the real dataset."""

from __future__ import annotations

import math

import torch

from fedrepro.data.synthetic import render as R

Tensor = torch.Tensor

_Quad = tuple[tuple[float, float], tuple[float, float], tuple[float, float], tuple[float, float]]


def _mirror(q: _Quad) -> _Quad:
    return tuple((-x, y) for x, y in q)  # type: ignore[return-value]


_SHORT_SLEEVE: _Quad = ((-0.42, -0.6), (-0.85, -0.25), (-0.68, 0.0), (-0.42, -0.2))
_LONG_SLEEVE: _Quad = ((-0.45, -0.65), (-0.75, -0.4), (-0.88, 0.65), (-0.58, 0.7))
_SHIRT_SLEEVE: _Quad = ((-0.42, -0.65), (-0.75, -0.35), (-0.82, 0.45), (-0.55, 0.45))

_TEMPLATES: list[list[_Quad]] = [
    # T-shirt/top
    [((-0.42, -0.6), (0.42, -0.6), (0.45, 0.8), (-0.45, 0.8)),
     _SHORT_SLEEVE, _mirror(_SHORT_SLEEVE)],
    # Trouser
    [((-0.4, -0.85), (0.4, -0.85), (0.42, -0.45), (-0.42, -0.45)),
     ((-0.42, -0.5), (-0.02, -0.5), (-0.08, 0.9), (-0.4, 0.9)),
     ((0.02, -0.5), (0.42, -0.5), (0.4, 0.9), (0.08, 0.9))],
    # Pullover
    [((-0.45, -0.65), (0.45, -0.65), (0.45, 0.75), (-0.45, 0.75)),
     _LONG_SLEEVE, _mirror(_LONG_SLEEVE)],
    # Dress
    [((-0.25, -0.85), (0.25, -0.85), (0.3, -0.1), (-0.3, -0.1)),
     ((-0.3, -0.15), (0.3, -0.15), (0.65, 0.88), (-0.65, 0.88))],
    # Coat
    [((-0.48, -0.7), (0.48, -0.7), (0.5, 0.88), (-0.5, 0.88)), _LONG_SLEEVE, _mirror(_LONG_SLEEVE)],
    # Sandal
    [((-0.9, 0.35), (0.9, 0.3), (0.9, 0.48), (-0.9, 0.5)),
     ((-0.6, 0.35), (-0.45, 0.35), (-0.1, -0.15), (-0.25, -0.15)),
     ((0.0, 0.33), (0.15, 0.33), (0.45, -0.05), (0.3, -0.05)),
     ((-0.35, -0.1), (0.6, -0.1), (0.6, 0.0), (-0.35, 0.0))],
    # Shirt
    [((-0.42, -0.65), (0.42, -0.65), (0.44, 0.8), (-0.44, 0.8)),
     _SHIRT_SLEEVE, _mirror(_SHIRT_SLEEVE),
     ((-0.18, -0.75), (0.18, -0.75), (0.1, -0.5), (-0.1, -0.5))],
    # Sneaker
    [((-0.9, 0.35), (0.9, 0.35), (0.88, 0.55), (-0.88, 0.55)),
     ((-0.85, 0.38), (0.85, 0.38), (0.3, -0.1), (-0.6, -0.2))],
    # Bag
    [((-0.7, -0.2), (0.7, -0.2), (0.75, 0.75), (-0.75, 0.75)),
     ((-0.45, -0.2), (-0.35, -0.2), (-0.25, -0.7), (-0.35, -0.7)),
     ((-0.35, -0.75), (0.35, -0.75), (0.35, -0.62), (-0.35, -0.62)),
     ((0.35, -0.2), (0.45, -0.2), (0.35, -0.7), (0.25, -0.7))],
    # Ankle boot
    [((-0.55, -0.85), (0.05, -0.85), (0.1, 0.3), (-0.55, 0.3)),
     ((-0.55, 0.1), (0.55, 0.15), (0.88, 0.5), (-0.55, 0.6)),
     ((-0.6, 0.55), (0.9, 0.5), (0.9, 0.65), (-0.6, 0.68))],
]  # fmt: skip
_PLACKET = torch.tensor([0, 0, 0, 0, 1, 0, 1, 0, 0, 0], dtype=torch.bool)  # coat, shirt
# Classes that morph part-way toward a sibling (tops; footwear), as real items vary between
# the prototypes: a long T-shirt sleeve, a low boot.
_FAMILIES = ((0, 2, 4, 6), (5, 7, 9), (1,), (3,), (8,))


def _template_tensor() -> Tensor:
    """C×Q×4×2 quads, padded with degenerate (all-zero) quads that draw nothing."""
    q_max = max(len(t) for t in _TEMPLATES)
    out = torch.zeros(len(_TEMPLATES), q_max, 4, 2)
    for c, quads in enumerate(_TEMPLATES):
        out[c, : len(quads)] = torch.tensor(quads, dtype=torch.float32)
    return out


_QUADS = _template_tensor()


def render_fashion(labels: Tensor, size: int, gen: torch.Generator) -> Tensor:
    """Gray clothing images (float N×1×H×W), light garments on black."""
    n = len(labels)
    partner = labels.clone()
    for family in _FAMILIES:
        members = torch.tensor(family)
        pick = members[torch.randint(len(family), (n,), generator=gen)]
        partner = torch.where(torch.isin(labels, members), pick, partner)
    blend = R.uniform(gen, n, 0.0, 0.45).view(-1, 1, 1, 1)
    quads = torch.lerp(_QUADS[labels], _QUADS[partner], blend)  # N×Q×4×2
    real = quads.abs().sum((2, 3), keepdim=True) > 0
    quads += torch.randn(quads.shape, generator=gen) * 0.06 * real
    quads[..., 0] *= R.uniform(gen, n, 0.8, 1.2).view(-1, 1, 1)
    quads[..., 1] *= R.uniform(gen, n, 0.88, 1.08).view(-1, 1, 1)
    angle = R.uniform(gen, n, -0.1, 0.1).view(-1, 1, 1)
    quads = R.rotate(quads, angle)
    quads = quads * 0.92 + (torch.rand(n, 1, 1, 2, generator=gen) - 0.5) * 0.12
    gx, gy = R.grid(size)
    inside = torch.full((n, size, size), -1e3)  # union = max of signed distances (no seams)
    for q in range(quads.shape[1]):
        inside = torch.maximum(inside, R.convex_polygon_distance(gx, gy, quads[:, q]))
    mask = R.soft_step(inside, 1.0 / size)
    shade = R.uniform(gen, n, 0.3, 1.0).view(-1, 1, 1)
    # Fabric: half the items carry a striped print; all get soft shading.
    freq, theta = R.uniform(gen, n, 2, 7), R.uniform(gen, n, 0, math.pi)
    stripes = R.grating(gx, gy, freq, theta, R.uniform(gen, n, 0, 2 * math.pi))
    printed = R.uniform(gen, n, 0, 0.35) * (torch.rand(n, generator=gen) < 0.5)
    fabric = 1 - printed.view(-1, 1, 1) * stripes + 0.15 * R.smooth_noise(gen, n, 1, size, 5)[:, 0]
    # Coats and shirts often show a dark front opening down the body's centre line.
    has_placket = _PLACKET[labels] & (torch.rand(n, generator=gen) < 0.7)
    centre = quads[:, 0, :, 0].mean(1).view(-1, 1, 1)
    placket = has_placket.view(-1, 1, 1) * torch.exp(-(((gx - centre) / 0.05) ** 2))
    img = (mask * shade * (fabric - 0.45 * placket)).unsqueeze(1)
    return R.add_noise(img, gen, 0.03, 0.03)

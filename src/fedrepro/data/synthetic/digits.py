"""Procedural digit glyphs shared by every digit domain (MNIST, USPS, SVHN, SynthDigits,
Roy et al.'s Synthetic Digits, MNIST-M), so class semantics carry across domains and only the
style differs.

Each digit is a stroke skeleton (polylines in a box of about 0.9 × 1.6 units). Every image
warps its skeleton (affine pose, slant, smooth bend, per-point jitter), draws it with a
random stroke width, and a domain style puts it on a background."""

from __future__ import annotations

import math
import zlib

import numpy as np
import torch

from fedrepro.data.synthetic import render as R
from fedrepro.data.synthetic.objects import natural_background

Tensor = torch.Tensor
Polyline = list[tuple[float, float]]


def _arc(cx: float, cy: float, rx: float, ry: float, a0: float, a1: float, n: int = 10) -> Polyline:
    """Points on an elliptic arc; angles in degrees, y points down (−90° is the top)."""
    angles = np.deg2rad(np.linspace(a0, a1, n))
    return [(cx + rx * math.cos(a), cy + ry * math.sin(a)) for a in angles]


def _digit_skeletons() -> list[list[Polyline]]:
    two_top = _arc(0, -0.38, 0.42, 0.4, -200, 20, 9)
    return [
        [_arc(0, 0, 0.42, 0.75, -90, 270, 13)],
        [[(-0.25, -0.5), (0.05, -0.8), (0.05, 0.8)]],
        [two_top + [(-0.45, 0.8), (0.45, 0.8)]],
        [_arc(0, -0.4, 0.36, 0.38, -160, 90, 9) + _arc(0, 0.38, 0.42, 0.42, -90, 160, 9)],
        [[(0.22, -0.8), (-0.45, 0.3), (0.45, 0.3)], [(0.22, -0.8), (0.22, 0.8)]],
        [[(0.4, -0.8), (-0.3, -0.8), (-0.34, -0.1)] + _arc(0, 0.3, 0.42, 0.45, -140, 150, 10)],
        [[(0.3, -0.8), (-0.12, -0.35), (-0.38, 0.25)], _arc(0, 0.4, 0.4, 0.38, 180, 540, 10)],
        [[(-0.45, -0.8), (0.45, -0.8), (-0.08, 0.8)]],
        [_arc(0, -0.42, 0.33, 0.36, 90, 450, 10), _arc(0, 0.38, 0.42, 0.42, -90, 270, 11)],
        [_arc(0, -0.4, 0.4, 0.38, 0, 360, 10), [(0.4, -0.4), (0.3, 0.2), (0.0, 0.8)]],
    ]


def _random_skeletons(family: str, count: int) -> list[list[Polyline]]:
    """Glyph-like classes that are not digits (random 2–3 stroke figures), for the
    pretraining source set."""
    rng = np.random.default_rng(zlib.crc32(f"glyphs/{family}".encode()))
    out = []
    for _ in range(count):
        strokes = []
        for _ in range(int(rng.integers(2, 4))):
            if rng.random() < 0.4:
                cx, cy = rng.uniform(-0.3, 0.3), rng.uniform(-0.5, 0.5)
                a0 = rng.uniform(-180, 180)
                rx, ry = rng.uniform(0.2, 0.45), rng.uniform(0.2, 0.6)
                strokes.append(_arc(cx, cy, rx, ry, a0, a0 + rng.uniform(120, 330), 9))
            else:
                pts = rng.uniform([-0.45, -0.8], [0.45, 0.8], size=(int(rng.integers(2, 4)), 2))
                strokes.append([tuple(p) for p in pts])
        out.append(strokes)
    return out


def _pack(skeletons: list[list[Polyline]]) -> tuple[Tensor, Tensor, Tensor]:
    """Class skeletons → padded tensors: points C×P×2, segment index pairs C×S×2, valid C×S."""
    n_pts = max(sum(len(line) for line in glyph) for glyph in skeletons)
    n_seg = max(sum(len(line) - 1 for line in glyph) for glyph in skeletons)
    points = torch.zeros(len(skeletons), n_pts, 2)
    segs = torch.zeros(len(skeletons), n_seg, 2, dtype=torch.long)
    valid = torch.zeros(len(skeletons), n_seg, dtype=torch.bool)
    for c, glyph in enumerate(skeletons):
        p = s = 0
        for line in glyph:
            points[c, p : p + len(line)] = torch.tensor(line, dtype=torch.float32)
            for i in range(len(line) - 1):
                segs[c, s] = torch.tensor([p + i, p + i + 1])
                valid[c, s] = True
                s += 1
            p += len(line)
    return points, segs, valid


DIGITS = _pack(_digit_skeletons())


def glyph_set(family: str, count: int) -> tuple[Tensor, Tensor, Tensor]:
    return _pack(_random_skeletons(family, count))


def draw_glyphs(
    labels: Tensor,
    glyphs: tuple[Tensor, Tensor, Tensor],
    size: int,
    gen: torch.Generator,
    *,
    scale: tuple[float, float],
    width: tuple[float, float],
    wobble: float,
    offset: tuple[float, float] = (0.0, 0.0),
) -> Tensor:
    """Soft stroke masks N×H×W. ``scale`` is the glyph half-height as a fraction of the
    image, ``width`` the stroke half-width in glyph units, ``wobble`` the handwriting jitter
    (0 = font-like, 1 = strongly handwritten); ``offset`` shifts glyphs horizontally."""
    points, segs, valid = glyphs
    n = len(labels)
    pts = points[labels].clone()  # N×P×2
    # Handwriting: per-point jitter plus a smooth bend, then slant, rotation and size.
    pts += torch.randn(pts.shape, generator=gen) * 0.1 * wobble
    bend = R.uniform(gen, n, -0.25, 0.25).view(-1, 1) * wobble
    pts[..., 0] += bend * (pts[..., 1] ** 2 - 0.3)
    slant = R.uniform(gen, n, -0.3, 0.3).view(-1, 1) * (0.4 + 0.6 * wobble)
    pts[..., 0] += slant * pts[..., 1]
    pts[..., 0] *= R.uniform(gen, n, 0.75, 1.2).view(-1, 1)
    angle = R.uniform(gen, n, -0.2, 0.2).view(-1, 1) * (0.3 + 0.7 * wobble)
    pts = R.rotate(pts, angle)
    s = R.uniform(gen, n, *scale).view(-1, 1, 1) / 0.8
    move = 0.06 + 0.1 * wobble
    shift = torch.stack(
        [R.uniform(gen, n, -move, move) + offset[0], R.uniform(gen, n, -move, move) + offset[1]], -1
    ).view(-1, 1, 2)
    pts = pts * s + shift
    seg_pts = torch.gather(
        pts.unsqueeze(1).expand(-1, segs.shape[1], -1, -1),
        2,
        segs[labels].unsqueeze(-1).expand(-1, -1, -1, 2),
    )  # N×S×2×2
    # Broken strokes and a stray scribble, more often the more handwritten the style.
    keep = valid[labels] & (torch.rand(n, segs.shape[1], generator=gen) >= 0.1 * wobble)
    stray = (torch.rand(n, 2, 2, generator=gen) * 2 - 1) * 0.8
    stray[:, 1] = stray[:, 0] + (stray[:, 1] - stray[:, 0]) * 0.4
    seg_pts = torch.cat([seg_pts, stray.unsqueeze(1)], 1)
    keep = torch.cat([keep, (torch.rand(n, 1, generator=gen) < 0.5 * wobble)], 1)
    half_width = R.uniform(gen, n, *width).view(-1, 1, 1) * s.view(-1, 1, 1)
    # Only pixels inside the batch's bounding box (plus stroke width) can be inked: glyphs
    # offset to the border (neighbours) then cost a fraction of a full-image draw.
    gx, gy = R.grid(size)
    margin = float(half_width.max()) + 4.0 / size
    ends = seg_pts[keep]  # K×2×2, the drawn segments only
    lo, hi = ends.amin((0, 1)) - margin, ends.amax((0, 1)) + margin
    cols = (gx[0, 0] >= lo[0]) & (gx[0, 0] <= hi[0])
    rows = (gy[0, :, 0] >= lo[1]) & (gy[0, :, 0] <= hi[1])
    dist = torch.full((n, size, size), 1e3)
    if len(ends) and cols.any() and rows.any():
        inner = R.strokes_distance(gx[..., cols], gy[:, rows], seg_pts, keep)
        dist[:, rows.nonzero()[:, 0, None], cols.nonzero()[:, 0]] = inner
    return R.soft_step(half_width - dist, 1.2 / size)


def _neighbours(n: int, size: int, gen: torch.Generator, style: dict, chance: float) -> Tensor:
    """Masks of random distractor digits cut by the left and right borders (house-number
    context), each present with probability ``chance``."""
    out = torch.zeros(n, size, size)
    for side in (-1.05, 1.05):
        other = torch.randint(0, 10, (n,), generator=gen)
        mask = draw_glyphs(other, DIGITS, size, gen, offset=(side, 0.0), **style)
        present = (torch.rand(n, generator=gen) < chance).float().view(-1, 1, 1)
        out = torch.maximum(out, mask * present)
    return out


def _contrasting_colours(gen: torch.Generator, n: int) -> tuple[Tensor, Tensor]:
    """Background and ink colours (N×3×1×1) whose brightness differs by at least 0.3."""
    bg_v = R.uniform(gen, n, 0.1, 0.95)
    gap = R.uniform(gen, n, 0.3, 0.7)
    ink_v = torch.where(bg_v > 0.5, bg_v - gap, bg_v + gap).clamp(0.0, 1.0)
    bg = R.colour(R.uniform(gen, n, 0, 1), R.uniform(gen, n, 0, 0.8), bg_v)
    ink = R.colour(R.uniform(gen, n, 0, 1), R.uniform(gen, n, 0, 0.8), ink_v)
    return bg, ink


_HANDWRITTEN = {"scale": (0.62, 0.75), "width": (0.09, 0.17), "wobble": 1.0}


def _mnist(labels: Tensor, size: int, gen: torch.Generator) -> Tensor:
    """White handwriting on black, centred."""
    mask = draw_glyphs(labels, DIGITS, size, gen, **_HANDWRITTEN).unsqueeze(1)
    return R.add_noise(
        mask * R.uniform(gen, len(labels), 0.8, 1.0).view(-1, 1, 1, 1), gen, 0.03, 0.03
    )


def _usps(labels: Tensor, size: int, gen: torch.Generator) -> Tensor:
    """Thick handwriting filling the box, blurred, normalised to full range."""
    mask = draw_glyphs(labels, DIGITS, size, gen, scale=(0.78, 0.9), width=(0.14, 0.22), wobble=0.9)
    img = R.blur(mask.unsqueeze(1), R.uniform(gen, len(labels), 0.5, 1.0))
    return R.add_noise(img / img.amax((2, 3), keepdim=True).clamp_min(1e-3), gen, 0.03, 0.03)


def _printed_digits(
    labels: Tensor, size: int, gen: torch.Generator, style: dict, chance: float
) -> tuple[Tensor, Tensor, Tensor]:
    """Digit masks with neighbours (with probability ``chance``) and contrasting colours."""
    mask = draw_glyphs(labels, DIGITS, size, gen, **style)
    mask = torch.maximum(mask, _neighbours(len(labels), size, gen, style, chance=chance))
    bg, ink = _contrasting_colours(gen, len(labels))
    return mask, bg, ink


def _svhn(labels: Tensor, size: int, gen: torch.Generator) -> Tensor:
    """Printed digit with neighbours on a photo-like, unevenly lit, blurred background."""
    n = len(labels)
    style = {"scale": (0.5, 0.7), "width": (0.1, 0.2), "wobble": 0.35}
    mask, bg, ink = _printed_digits(labels, size, gen, style, chance=0.75)
    bg = bg + R.fractal_noise(gen, n, 3, size) * R.uniform(gen, n, 0.05, 0.25).view(-1, 1, 1, 1)
    x, y = R.grid(size)
    light = R.uniform(gen, n, -0.25, 0.25).view(-1, 1, 1, 1) * (x + y).unsqueeze(0)
    img = torch.lerp(bg, ink.expand_as(bg), mask.unsqueeze(1)) + light
    return R.add_noise(R.blur(img, R.uniform(gen, n, 0.3, 1.4)), gen, 0.01, 0.06)


def _synthdigits(labels: Tensor, size: int, gen: torch.Generator) -> Tensor:
    """Font-like digits on a flat colour, sometimes with neighbours, lightly blurred."""
    n = len(labels)
    style = {"scale": (0.55, 0.75), "width": (0.1, 0.22), "wobble": 0.1}
    mask, bg, ink = _printed_digits(labels, size, gen, style, chance=0.4)
    img = torch.lerp(
        bg.expand(-1, -1, size, size), ink.expand(-1, -1, size, size), mask.unsqueeze(1)
    )
    return R.add_noise(R.blur(img, R.uniform(gen, n, 0.0, 0.8)), gen, 0.02, 0.02)


def _syn(labels: Tensor, size: int, gen: torch.Generator) -> Tensor:
    """Roy et al.'s Synthetic Digits (FedPCE's SYN): one printed digit of varied size and pose
    in a random colour on a photo-like cluttered background, its ink light on dark
    backgrounds and dark on light ones."""
    n = len(labels)
    mask = draw_glyphs(labels, DIGITS, size, gen, scale=(0.45, 0.8), width=(0.1, 0.22), wobble=0.4)
    bg = natural_background(gen, n, size, clutter=2).clamp(0, 1)
    dark = bg.mean((1, 2, 3)) < 0.5
    value = torch.where(dark, R.uniform(gen, n, 0.75, 1.0), R.uniform(gen, n, 0.0, 0.25))
    ink = R.colour(R.uniform(gen, n, 0, 1), R.uniform(gen, n, 0.2, 0.9), value)
    return R.add_noise(torch.lerp(bg, ink.expand_as(bg), mask.unsqueeze(1)), gen, 0.02, 0.03)


def _mnistm(labels: Tensor, size: int, gen: torch.Generator) -> Tensor:
    """MNIST-style glyph blended as |patch − glyph| over a colourful textured patch."""
    mask = draw_glyphs(labels, DIGITS, size, gen, **_HANDWRITTEN)
    patch = natural_background(gen, len(labels), size, clutter=2).clamp(0, 1)
    return (patch - mask.unsqueeze(1)).abs()


_DOMAINS = {
    "mnist": _mnist,
    "usps": _usps,
    "svhn": _svhn,
    "synthdigits": _synthdigits,
    "syn": _syn,
    "mnistm": _mnistm,
}


def render_digits(domain: str, labels: Tensor, size: int, gen: torch.Generator) -> Tensor:
    """Digit images (float N×C×H×W, C=1 for mnist/usps) in the style of ``domain``."""
    if domain not in _DOMAINS:
        raise ValueError(f"unknown digit domain {domain!r}; allowed: {', '.join(_DOMAINS)}")
    return _DOMAINS[domain](labels, size, gen)


def render_glyph_objects(
    labels: Tensor, glyphs: tuple[Tensor, Tensor, Tensor], size: int, gen: torch.Generator
) -> Tensor:
    """Coloured non-digit glyphs on natural backgrounds (pretraining-source classes)."""
    n = len(labels)
    mask = draw_glyphs(labels, glyphs, size, gen, scale=(0.5, 0.75), width=(0.08, 0.18), wobble=0.6)
    bg = natural_background(gen, n, size, clutter=2)
    ink = R.colour(R.uniform(gen, n, 0, 1), R.uniform(gen, n, 0.3, 1), R.uniform(gen, n, 0, 1))
    return R.add_noise(torch.lerp(bg, ink.expand_as(bg), mask.unsqueeze(1)), gen, 0.03, 0.03)

"""Batched drawing primitives for the synthetic analogs: every function takes per-image
parameters as length-N tensors and returns N×H×W (masks, fields) or N×3×H×W (colour)
tensors, so a whole batch is drawn with a handful of tensor ops and no pixel loops."""

from __future__ import annotations

import functools
import math

import torch
import torch.nn.functional as F

Tensor = torch.Tensor


def uniform(gen: torch.Generator, n: int, low: float, high: float) -> Tensor:
    return torch.rand(n, generator=gen) * (high - low) + low


def grid(size: int) -> tuple[Tensor, Tensor]:
    """Pixel-centre coordinates in [-1, 1]: (x, y), each 1×H×W, y pointing down."""
    t = (torch.arange(size, dtype=torch.float32) + 0.5) / size * 2 - 1
    return t.view(1, 1, size), t.view(1, size, 1)


def rotate(points: Tensor, angle: Tensor) -> Tensor:
    """Rotate points (…×2, last dim x, y) by ``angle`` radians, broadcast over leading dims."""
    x, y = points[..., 0], points[..., 1]
    cos, sin = torch.cos(angle), torch.sin(angle)
    return torch.stack([x * cos - y * sin, x * sin + y * cos], -1)


def to_local(
    x: Tensor, y: Tensor, tx: Tensor, ty: Tensor, scale: Tensor, angle: Tensor
) -> tuple[Tensor, Tensor]:
    """Image coordinates → object coordinates (translate, rotate by -angle, unscale)."""
    dx, dy = x - tx.view(-1, 1, 1), y - ty.view(-1, 1, 1)
    cos, sin = torch.cos(angle).view(-1, 1, 1), torch.sin(angle).view(-1, 1, 1)
    s = scale.view(-1, 1, 1)
    return (cos * dx + sin * dy) / s, (-sin * dx + cos * dy) / s


def soft_step(signed_distance: Tensor, softness: float | Tensor) -> Tensor:
    """Anti-aliased inside mask from a signed distance (positive inside)."""
    return torch.sigmoid(signed_distance / softness)


def blob_distance(lx: Tensor, ly: Tensor, shape: dict[str, Tensor]) -> Tensor:
    """Signed distance-like field of a radial blob: r(φ) = 1 + a1·cos(k1φ+p1) + a2·cos(k2φ+p2),
    squashed by ``aspect``; superellipse exponent ``power`` rounds (2) or squares (>2) it."""
    aspect = shape["aspect"].view(-1, 1, 1)
    lx, ly = lx / aspect.sqrt(), ly * aspect.sqrt()
    p = shape["power"].view(-1, 1, 1)
    radius = (lx.abs().pow(p) + ly.abs().pow(p) + 1e-9).pow(1 / p)
    phi = torch.atan2(ly, lx)
    boundary = (
        1
        + shape["a1"].view(-1, 1, 1)
        * torch.cos(shape["k1"].view(-1, 1, 1) * phi + shape["p1"].view(-1, 1, 1))
        + shape["a2"].view(-1, 1, 1)
        * torch.cos(shape["k2"].view(-1, 1, 1) * phi + shape["p2"].view(-1, 1, 1))
    )
    return boundary - radius


def blob_shape(n: int, **traits: Tensor) -> dict[str, Tensor]:
    """Blob traits for ``blob_distance``; unnamed ones default to a plain circle."""
    shape = {key: torch.zeros(n) for key in ("k1", "a1", "p1", "k2", "a2", "p2")}
    shape.update(power=torch.full((n,), 2.0), aspect=torch.ones(n))
    shape.update(traits)
    return shape


def add_noise(images: Tensor, gen: torch.Generator, low: float, high: float) -> Tensor:
    """Add Gaussian pixel noise with a per-image std drawn from [low, high]."""
    std = uniform(gen, images.shape[0], low, high).view(-1, 1, 1, 1)
    return images + torch.randn(images.shape, generator=gen) * std


def strokes_distance(px: Tensor, py: Tensor, points: Tensor, valid: Tensor) -> Tensor:
    """Minimum distance from each pixel to a polyline set: ``points`` N×S×2×2 segment end
    points, ``valid`` N×S (padding segments are ignored). Works on squared distances and
    keeps per-segment terms in their small broadcast shapes, as this is the hot loop."""
    points = torch.where(valid[..., None, None], points, torch.tensor(1e3))
    best = torch.full((points.shape[0], py.shape[-2], px.shape[-1]), 1e6)
    for s in range(points.shape[1]):
        if not bool(valid[:, s].any()):
            continue
        x0, y0, x1, y1 = (points[:, s].reshape(-1, 4)[:, i].view(-1, 1, 1) for i in range(4))
        vx, vy = x1 - x0, y1 - y0
        inv = 1.0 / (vx * vx + vy * vy + 1e-9)
        dx, dy = px - x0, py - y0  # N×1×W and N×H×1
        t = (dx * (vx * inv) + dy * (vy * inv)).clamp_(0, 1)
        ex = dx - t * vx
        ey = dy - t * vy
        torch.minimum(best, ex.mul_(ex).add_(ey.mul_(ey)), out=best)
    return best.sqrt_()


def convex_polygon_distance(px: Tensor, py: Tensor, verts: Tensor) -> Tensor:
    """Signed distance (positive inside) to convex polygons ``verts`` N×V×2 (any winding);
    degenerate (zero-area) polygons come out as far outside."""
    nxt = verts.roll(-1, dims=1)
    area2 = (verts[..., 0] * nxt[..., 1] - nxt[..., 0] * verts[..., 1]).sum(1)
    orient = torch.sign(area2).view(-1, 1, 1)
    inside = torch.full((verts.shape[0], py.shape[-2], px.shape[-1]), 1e3)
    for v in range(verts.shape[1]):
        x0, y0 = verts[:, v, 0].view(-1, 1, 1), verts[:, v, 1].view(-1, 1, 1)
        ex, ey = nxt[:, v, 0].view(-1, 1, 1) - x0, nxt[:, v, 1].view(-1, 1, 1) - y0
        length = torch.hypot(ex, ey).clamp_min(1e-6)
        d = orient * (ex * (py - y0) - ey * (px - x0)) / length
        inside = torch.minimum(inside, d)
    return torch.where(orient == 0, torch.tensor(-1e3), inside)


def smooth_noise(gen: torch.Generator, n: int, channels: int, size: int, cells: int) -> Tensor:
    """Smooth random field in [-1, 1]-ish: coarse uniform noise upsampled bicubically
    (as two matrix products, the fast way for many small images)."""
    coarse = torch.rand(n, channels, cells, cells, generator=gen) * 2 - 1
    up = _upsample_matrix(cells, size)
    return up @ coarse @ up.T


@functools.cache
def _upsample_matrix(cells: int, size: int) -> Tensor:
    """size×cells matrix of 1-D bicubic interpolation weights (bicubic is separable)."""
    eye = torch.eye(cells).view(cells, 1, cells, 1)
    rows = F.interpolate(eye, size=(size, 1), mode="bicubic", align_corners=False)
    return rows[:, 0, :, 0].T.contiguous()


def fractal_noise(
    gen: torch.Generator, n: int, channels: int, size: int, octaves: int = 4
) -> Tensor:
    """Sum of smooth-noise octaves with halving amplitude: natural-looking texture."""
    out = torch.zeros(n, channels, size, size)
    for o in range(octaves):
        out += smooth_noise(gen, n, channels, size, 2 ** (o + 1) + 1) / 2**o
    return out / 1.875


def grating(lx: Tensor, ly: Tensor, freq: Tensor, theta: Tensor, phase: Tensor) -> Tensor:
    """Oriented sinusoid in [0, 1] (object coordinates, so it turns with the object)."""
    u = lx * torch.cos(theta).view(-1, 1, 1) + ly * torch.sin(theta).view(-1, 1, 1)
    return 0.5 + 0.5 * torch.sin(2 * math.pi * freq.view(-1, 1, 1) * u + phase.view(-1, 1, 1))


def texture(
    lx: Tensor, ly: Tensor, kind: Tensor, freq: Tensor, theta: Tensor, phase: Tensor
) -> Tensor:
    """Class texture in [0, 1]: 0 smooth, 1 stripes, 2 checks, 3 dots."""
    stripes = grating(lx, ly, freq, theta, phase)
    other = grating(lx, ly, freq, theta + math.pi / 2, phase)
    checks = 0.5 + 2 * (stripes - 0.5) * (other - 0.5)
    dots = ((stripes * other) > 0.55).float() * 0.8 + 0.1
    kind = kind.view(-1, 1, 1)
    out = torch.full_like(stripes, 0.5)
    out = torch.where(kind == 1, stripes, out)
    out = torch.where(kind == 2, checks, out)
    return torch.where(kind == 3, dots, out)


def hsv_to_rgb(h: Tensor, s: Tensor, v: Tensor) -> Tensor:
    """Vectorised HSV → RGB; inputs broadcast together, channel dim added at dim 1."""
    h = torch.remainder(h, 1.0)
    k = torch.stack([(5 + h * 6) % 6, (3 + h * 6) % 6, (1 + h * 6) % 6], dim=1)
    s, v = s.unsqueeze(1), v.unsqueeze(1)
    return v - v * s * torch.clamp(torch.minimum(k, 4 - k), 0, 1)


def colour(h: Tensor, s: Tensor, v: Tensor) -> Tensor:
    """Per-image colours N×3×1×1 from per-image HSV."""
    return hsv_to_rgb(h, s, v).view(-1, 3, 1, 1)


def blur(images: Tensor, sigma: Tensor | float) -> Tensor:
    """Gaussian blur with a per-image sigma in [0, 2] pixels, interpolated between three
    fixed blurs (sigma 0, 1, 2) with tent weights, so the batch needs only two blurs."""
    sig = torch.as_tensor(sigma, dtype=torch.float32).expand(images.shape[0]).view(-1, 1, 1, 1)
    out = (1 - sig).clamp(0, 1) * images
    out += (1 - (sig - 1).abs()).clamp(0, 1) * _gauss(images, 1.0)
    return out + (sig - 1).clamp(0, 1) * _gauss(images, 2.0)


def _gauss(images: Tensor, sigma: float) -> Tensor:
    """Separable Gaussian blur as two small matrix products (edge pixels replicated);
    much faster than a depthwise convolution over thousands of tiny images."""
    h, w = images.shape[-2:]
    return _blur_matrix(h, sigma) @ images @ _blur_matrix(w, sigma).T


@functools.cache
def _blur_matrix(size: int, sigma: float) -> Tensor:
    radius = max(1, math.ceil(2.5 * sigma))
    offsets = torch.arange(-radius, radius + 1)
    weights = torch.exp(-(offsets.float() ** 2) / (2 * sigma**2))
    weights = weights / weights.sum()
    rows = torch.arange(size).view(-1, 1).expand(-1, len(offsets))
    cols = (rows + offsets).clamp(0, size - 1)
    matrix = torch.zeros(size, size)
    matrix.index_put_((rows.reshape(-1), cols.reshape(-1)), weights.repeat(size), accumulate=True)
    return matrix


def edges(mask: Tensor, width: int = 1) -> Tensor:
    """Morphological gradient of soft masks N×H×W: a band of about ``width`` pixels."""
    m = mask.unsqueeze(1)
    k = 2 * width + 1
    dilated = F.max_pool2d(m, k, stride=1, padding=width)
    eroded = -F.max_pool2d(-m, k, stride=1, padding=width)
    return (dilated - eroded).squeeze(1).clamp(0, 1)


def gray_to_rgb(gray: Tensor) -> Tensor:
    return gray.unsqueeze(1).repeat(1, 3, 1, 1)

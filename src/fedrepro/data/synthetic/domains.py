"""Domain styles for the multi-domain analogs: the same object classes (shapes, parts,
palettes from ``objects``) rendered as DomainNet's six domains or Office-Caltech's
four, so a one-domain-per-client split shows feature shift with shared label semantics."""

from __future__ import annotations

import math

import torch

from fedrepro.data.synthetic import render as R
from fedrepro.data.synthetic.objects import Layers, compose_natural, draw_layers, natural_background

Tensor = torch.Tensor


def _flat_fill(layers: Layers) -> Tensor:
    """Flat colours: primary on the body, secondary on the part (N×3×H×W)."""
    part_col = layers.col2.expand(-1, -1, *layers.body.shape[-2:])
    part_only = (layers.part * (1 - layers.body)).unsqueeze(1)
    return torch.lerp(layers.col1.expand_as(part_col), part_col, part_only)


def _plain(gen: torch.Generator, n: int, size: int, lo: float, hi: float, sat: float) -> Tensor:
    """Nearly uniform light background."""
    base = R.colour(R.uniform(gen, n, 0, 1), R.uniform(gen, n, 0, sat), R.uniform(gen, n, lo, hi))
    return base.expand(n, 3, size, size)


def _text_bars(gen: torch.Generator, n: int, size: int) -> Tensor:
    """Rows of dashes that look like lines of text (infographics)."""
    x, y = R.grid(size)
    freq = R.uniform(gen, n, 5, 9).view(-1, 1, 1)
    rows = torch.sin(2 * math.pi * freq * y + R.uniform(gen, n, 0, 6.3).view(-1, 1, 1)) > 0.55
    words = R.smooth_noise(gen, n, 1, size, max(4, size // 3))[:, 0] > -0.1
    return (rows & words).float() * (x.abs() < 0.95).float()


def _domainnet(
    domain: str, labels: Tensor, proto: dict[str, Tensor], size: int, gen: torch.Generator
) -> Tensor:
    n = len(labels)
    if domain == "real":
        layers = draw_layers(labels, proto, size, gen)
        return compose_natural(layers, natural_background(gen, n, size), gen)
    if domain == "clipart":
        layers = draw_layers(labels, proto, size, gen)
        img = torch.lerp(
            _plain(gen, n, size, 0.85, 1.0, 0.3), _flat_fill(layers), layers.mask.unsqueeze(1)
        )
        outline = R.edges(layers.mask, width=1).unsqueeze(1)
        return torch.lerp(img, torch.full_like(img, 0.08), outline)
    if domain == "painting":  # muted palette, brush-stroke texture, soft focus
        layers = draw_layers(labels, proto, size, gen)
        brush = R.smooth_noise(gen, n, 3, size, max(4, size // 4)) * 0.08
        bg = natural_background(gen, n, size, clutter=1) * 0.5 + 0.25 + brush
        fg = torch.lerp(layers.col1, layers.col2, 0.6 * layers.texture.unsqueeze(1))
        fg = fg * 0.8 + 0.2 * fg.mean(1, keepdim=True) + brush
        img = torch.lerp(bg, fg, layers.mask.unsqueeze(1))
        return R.add_noise(R.blur(img, R.uniform(gen, n, 0.6, 1.2)), gen, 0.01, 0.03)
    if domain == "sketch":
        layers = draw_layers(labels, proto, size, gen)
        hatch = (layers.texture > 0.75).float() * layers.body * 0.5
        ink = torch.maximum(R.edges(layers.mask, width=1), hatch)
        paper = R.uniform(gen, n, 0.85, 1.0).view(-1, 1, 1)
        pencil = R.uniform(gen, n, 0.15, 0.5).view(-1, 1, 1)
        gray = torch.lerp(paper.expand(n, size, size), pencil.expand(n, size, size), ink)
        return R.add_noise(R.gray_to_rgb(gray), gen, 0.01, 0.03)
    if domain == "quickdraw":
        layers = draw_layers(labels, proto, size, gen, jitter=2.0)
        hard = (layers.mask > 0.5).float()
        line = R.edges(hard, width=1) * (1 - hard)  # the one-pixel ring just outside
        return R.gray_to_rgb(1 - line)
    if domain == "infograph":
        layers = draw_layers(labels, proto, size, gen, scale_range=(0.22, 0.38), position=0.55)
        bg = _plain(gen, n, size, 0.75, 1.0, 0.5)
        bars = _text_bars(gen, n, size).unsqueeze(1)
        box_col = R.colour(
            R.uniform(gen, n, 0, 1), R.uniform(gen, n, 0.4, 1), R.uniform(gen, n, 0.2, 0.6)
        )
        bg = torch.lerp(bg, box_col.expand_as(bg), bars)
        return torch.lerp(bg, _flat_fill(layers), layers.mask.unsqueeze(1))
    raise ValueError(f"unknown DomainNet domain {domain!r}")


def _office_background(gen: torch.Generator, n: int, size: int) -> Tensor:
    """Desk/wall-like background: dull colours with slow variation."""
    base = R.colour(
        R.uniform(gen, n, 0.05, 0.15), R.uniform(gen, n, 0.0, 0.3), R.uniform(gen, n, 0.35, 0.75)
    )
    return base + 0.12 * R.smooth_noise(gen, n, 1, size, 3)


def _office(
    domain: str, labels: Tensor, proto: dict[str, Tensor], size: int, gen: torch.Generator
) -> Tensor:
    n = len(labels)
    if domain == "amazon":  # catalogue photo: centred, large, light background, clean
        layers = draw_layers(labels, proto, size, gen, scale_range=(0.48, 0.65), position=0.1)
        fg = torch.lerp(layers.col1, layers.col2, 0.6 * layers.texture.unsqueeze(1))
        fg = fg * layers.shade.unsqueeze(1)
        img = torch.lerp(_plain(gen, n, size, 0.8, 1.0, 0.1), fg, layers.mask.unsqueeze(1))
        return R.add_noise(img, gen, 0.0, 0.015)
    if domain == "caltech":  # varied natural photos with clutter
        layers = draw_layers(labels, proto, size, gen, scale_range=(0.3, 0.6), position=0.35)
        return compose_natural(layers, natural_background(gen, n, size), gen)
    if domain in ("dslr", "webcam"):  # same office scenes, sharp camera vs. webcam
        layers = draw_layers(labels, proto, size, gen, scale_range=(0.4, 0.62), position=0.2)
        fg = torch.lerp(layers.col1, layers.col2, 0.6 * layers.texture.unsqueeze(1))
        fg = fg * layers.shade.unsqueeze(1)
        img = torch.lerp(_office_background(gen, n, size), fg, layers.mask.unsqueeze(1))
        if domain == "dslr":
            return R.add_noise(img, gen, 0.005, 0.02)
        cast = 1 + (torch.rand(n, 3, 1, 1, generator=gen) - 0.5) * 0.35
        img = (img * 0.65 + 0.15) * cast
        return R.add_noise(R.blur(img, R.uniform(gen, n, 0.8, 1.6)), gen, 0.03, 0.06)
    raise ValueError(f"unknown Office domain {domain!r}")


def render_domain(
    dataset: str,
    domain: str,
    labels: Tensor,
    proto: dict[str, Tensor],
    size: int,
    gen: torch.Generator,
) -> Tensor:
    """Images (float N×3×H×W) of ``labels`` in one domain style of ``dataset``."""
    if dataset == "domainnet":
        return _domainnet(domain, labels, proto, size, gen)
    if dataset == "office10":
        return _office(domain, labels, proto, size, gen)
    raise ValueError(f"{dataset} has no synthetic domain styles")

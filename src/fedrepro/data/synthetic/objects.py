"""Object-like synthetic classes (CIFAR-10/100, Tiny-ImageNet, DomainNet, Office, the
pretraining source): each class is a composite of a radial blob body, an optional attached
part, a surface texture and a two-colour palette. Classes of one group (a CIFAR-100
superclass, say) share body shape and base hue and differ in the finer traits, so they are
confusable the way real sibling classes are. Every image re-draws pose, size, colour,
background clutter, lighting and noise around its class prototype."""

from __future__ import annotations

import math
import zlib
from dataclasses import dataclass

import numpy as np
import torch

from fedrepro.data.synthetic import render as R

Tensor = torch.Tensor


def prototypes(family: str, groups: list[int]) -> dict[str, Tensor]:
    """Class prototypes (one value per class for each trait), fixed by ``family`` alone so
    that every split and seed of a dataset shares the same classes.

    ``groups[c]`` is the group of class c; group traits: body shape, base hue, texture kind."""
    rng = np.random.default_rng(zlib.crc32(f"objects/{family}".encode()))
    n_groups = max(groups) + 1
    g = {
        "power": rng.choice([1.3, 2.0, 2.0, 4.0], n_groups),
        "aspect": rng.uniform(0.55, 1.6, n_groups),
        "k1": rng.choice([0, 3, 4, 5, 6], n_groups).astype(float),
        "a1": rng.uniform(0.1, 0.3, n_groups),
        "p1": rng.uniform(0, 2 * math.pi, n_groups),
        "hue1": rng.uniform(0, 1, n_groups),
        "tex_kind": rng.integers(0, 4, n_groups).astype(float),
    }
    c = len(groups)
    idx = np.asarray(groups)
    proto = {key: value[idx] for key, value in g.items()}
    proto["a1"] = np.where(proto["k1"] == 0, 0.0, proto["a1"])
    proto.update(
        k2=rng.choice([2, 3, 7, 8], c).astype(float),
        a2=rng.uniform(0.0, 0.12, c),
        p2=rng.uniform(0, 2 * math.pi, c),
        hue1=proto["hue1"] + rng.normal(0, 0.06, c),
        hue2=proto["hue1"] + rng.uniform(0.15, 0.5, c) * rng.choice([-1, 1], c),
        sat=rng.uniform(0.45, 0.95, c),
        val=rng.uniform(0.55, 0.95, c),
        tex_freq=rng.uniform(1.2, 3.5, c),
        tex_theta=rng.uniform(0, math.pi, c),
        part=(rng.random(c) < 0.65).astype(float),
        part_angle=rng.uniform(0, 2 * math.pi, c),
        part_dist=rng.uniform(0.75, 1.15, c),
        part_size=rng.uniform(0.3, 0.55, c),
        part_power=rng.choice([1.3, 2.0, 4.0], c),
        orient=rng.uniform(0, 2 * math.pi, c),
    )
    return {key: torch.as_tensor(value, dtype=torch.float32) for key, value in proto.items()}


@dataclass
class Layers:
    """The pieces a domain style composes into an image (all N×H×W unless noted)."""

    body: Tensor  # soft mask of the main shape
    part: Tensor  # soft mask of the attached part (zeros where the class has none)
    texture: Tensor  # class texture in [0, 1]
    col1: Tensor  # N×3×1×1 primary colour
    col2: Tensor  # N×3×1×1 secondary colour
    shade: Tensor  # lighting factor around 1

    @property
    def mask(self) -> Tensor:
        return torch.maximum(self.body, self.part)


def draw_layers(
    labels: Tensor,
    proto: dict[str, Tensor],
    size: int,
    gen: torch.Generator,
    *,
    scale_range: tuple[float, float] = (0.36, 0.6),
    position: float = 0.3,
    hue_shift: float = 0.0,
    sat_factor: float = 1.0,
    jitter: float = 1.0,
) -> Layers:
    """Pose, deform and colour each image's class prototype: ``scale_range`` and
    ``position`` bound its size and centre offset, ``jitter`` scales the shape variation,
    ``hue_shift``/``sat_factor`` shift the colour distribution."""
    n = len(labels)
    p = {k: v[labels] for k, v in proto.items()}
    x, y = R.grid(size)
    scale = R.uniform(gen, n, *scale_range)
    angle = p["orient"] + R.uniform(gen, n, -0.9, 0.9)
    tx, ty = R.uniform(gen, n, -position, position), R.uniform(gen, n, -position, position)
    lx, ly = R.to_local(x, y, tx, ty, scale, angle)
    shape = {
        "power": p["power"],
        "aspect": p["aspect"] * (1 + jitter * R.uniform(gen, n, -0.15, 0.15)),
        "k1": p["k1"],
        "a1": p["a1"] * (1 + jitter * R.uniform(gen, n, -0.3, 0.3)),
        "p1": p["p1"],
        "k2": p["k2"],
        "a2": p["a2"] * (1 + jitter * R.uniform(gen, n, -0.5, 0.5)),
        "p2": p["p2"] + jitter * R.uniform(gen, n, -0.4, 0.4),
    }
    soft = 2.0 / size / scale.view(-1, 1, 1)
    body = R.soft_step(R.blob_distance(lx, ly, shape), soft)
    # Attached part: a smaller blob at a class-specific place in object coordinates.
    part_scale = p["part_size"] * (1 + jitter * R.uniform(gen, n, -0.2, 0.2))
    cx = p["part_dist"] * torch.cos(p["part_angle"])
    cy = p["part_dist"] * torch.sin(p["part_angle"])
    plx, ply = R.to_local(lx, ly, cx, cy, part_scale, torch.zeros(n))
    part_dist = R.blob_distance(plx, ply, R.blob_shape(n, power=p["part_power"]))
    part = R.soft_step(part_dist, soft / part_scale.view(-1, 1, 1)) * p["part"].view(-1, 1, 1)
    freq = p["tex_freq"] * R.uniform(gen, n, 0.8, 1.25)
    theta = p["tex_theta"] + R.uniform(gen, n, -0.3, 0.3)
    tex = R.texture(lx, ly, p["tex_kind"], freq, theta, R.uniform(gen, n, 0, 2 * math.pi))
    # Colour is a cue but not a giveaway: jitter the hue, and recolour some objects at
    # random (keeping the palette's relative hue), as cars come in any colour.
    hue_jit = torch.randn(n, generator=gen) * 0.07 + hue_shift
    recolour = torch.rand(n, generator=gen) < 0.3
    hue_jit = torch.where(recolour, R.uniform(gen, n, 0, 1), hue_jit)
    sat = (p["sat"] * R.uniform(gen, n, 0.75, 1.15) * sat_factor).clamp(0, 1)
    val = (p["val"] * R.uniform(gen, n, 0.7, 1.15)).clamp(0, 1)
    col1 = R.colour(p["hue1"] + hue_jit, sat, val)
    col2 = R.colour(p["hue2"] + hue_jit, sat, (val * R.uniform(gen, n, 0.6, 1.0)).clamp(0, 1))
    light = R.uniform(gen, n, 0, 2 * math.pi).view(-1, 1, 1)
    strength = R.uniform(gen, n, 0.0, 0.3).view(-1, 1, 1)
    shade = 1 + strength * (torch.cos(light) * lx + torch.sin(light) * ly).clamp(-1.5, 1.5) / 1.5
    return Layers(body, part, tex, col1, col2, shade)


def natural_background(gen: torch.Generator, n: int, size: int, clutter: int = 3) -> Tensor:
    """Coloured, textured background with a few random distractor blobs (N×3×H×W)."""
    base = R.colour(R.uniform(gen, n, 0, 1), R.uniform(gen, n, 0, 0.6), R.uniform(gen, n, 0.2, 0.9))
    amp = R.uniform(gen, n, 0.05, 0.3).view(-1, 1, 1, 1)
    noise = R.fractal_noise(gen, n, 1, size) * 0.7 + R.fractal_noise(gen, n, 3, size) * 0.3
    bg = base + amp * noise
    x, y = R.grid(size)
    for _ in range(clutter):
        present = (torch.rand(n, generator=gen) < 0.6).float().view(-1, 1, 1)
        scale = R.uniform(gen, n, 0.12, 0.35)
        tx, ty = R.uniform(gen, n, -0.9, 0.9), R.uniform(gen, n, -0.9, 0.9)
        lx, ly = R.to_local(x, y, tx, ty, scale, R.uniform(gen, n, 0, 2 * math.pi))
        shape = R.blob_shape(
            n,
            power=R.uniform(gen, n, 1.3, 4.0),
            aspect=R.uniform(gen, n, 0.5, 1.8),
            k1=torch.randint(0, 7, (n,), generator=gen).float(),
            a1=R.uniform(gen, n, 0, 0.3),
            p1=R.uniform(gen, n, 0, 2 * math.pi),
        )
        mask = R.soft_step(R.blob_distance(lx, ly, shape), 2.0 / size / scale.view(-1, 1, 1))
        col = R.colour(
            R.uniform(gen, n, 0, 1), R.uniform(gen, n, 0, 0.9), R.uniform(gen, n, 0.1, 1)
        )
        bg = torch.lerp(bg, col.expand_as(bg), (mask * present).unsqueeze(1))
    return bg


def compose_natural(layers: Layers, background: Tensor, gen: torch.Generator) -> Tensor:
    """Textured two-colour object with lighting over ``background``; mild blur and noise."""
    n = background.shape[0]
    contrast = R.uniform(gen, n, 0.3, 0.85).view(-1, 1, 1, 1)
    fg = torch.lerp(layers.col1, layers.col2, contrast * layers.texture.unsqueeze(1))
    shade = layers.shade.unsqueeze(1)
    part_colour = layers.col2.expand_as(background) * shade
    img = torch.lerp(background, part_colour, layers.part.unsqueeze(1))  # part behind body
    img = torch.lerp(img, fg * shade, layers.body.unsqueeze(1))
    return R.add_noise(R.blur(img, R.uniform(gen, n, 0.0, 0.8)), gen, 0.01, 0.05)


def render_objects(
    labels: Tensor,
    proto: dict[str, Tensor],
    size: int,
    gen: torch.Generator,
    shifted: bool = False,
) -> Tensor:
    """Natural-style object images (float N×3×H×W). ``shifted`` draws from a slightly
    different colour/scale distribution (the CIFAR-10.1-like re-collection shift)."""
    n = len(labels)
    if shifted:
        layers = draw_layers(
            labels, proto, size, gen, scale_range=(0.34, 0.57), hue_shift=0.02, sat_factor=0.9
        )
    else:
        layers = draw_layers(labels, proto, size, gen)
    return compose_natural(layers, natural_background(gen, n, size), gen)

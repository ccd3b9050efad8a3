"""Per-client feature transforms named in the partition JSON (``client["transform"]``).

Applied to every batch a client reads (train and its local test), on float N×C×H×W images
in [0, 1], before any normalisation. Noise is fresh on every call, drawn from the caller's
``torch.Generator`` (which may live on another device than the batch).

Kinds:
  ``gaussian_noise`` {std}: x + std·ε, no clipping (NIID-Bench Gau(σ)).
  ``fedpce_noise`` {var}: per-image min-max scale to [0, 1], add N(0, var), scale back
  (FedPCE ``transform_image`` + ``DetAddGaussianNoise``).
  ``color_jitter`` {brightness, contrast, saturation, hue}: torchvision's adjust_* with these
  fixed factors, the four applied in a random order drawn per call (FedPCE ColorJitter clients).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch

_EPS = 1e-5  # FedPCE's guard in the min-max scaling


def apply_transform(
    x: torch.Tensor, spec: dict[str, Any] | None, generator: torch.Generator
) -> torch.Tensor:
    """``x`` transformed as the client's ``spec`` says (``None`` = unchanged)."""
    if spec is None:
        return x
    kind = spec.get("kind")
    if kind not in _KINDS:
        raise ValueError(f"client transform: unknown kind {kind!r}; expected one of {list(_KINDS)}")
    return _KINDS[kind](x, spec, generator)


def _gaussian_noise(x: torch.Tensor, spec: dict[str, Any], gen: torch.Generator) -> torch.Tensor:
    return x + _field(spec, "std") * _normal_like(x, gen)


def _fedpce_noise(x: torch.Tensor, spec: dict[str, Any], gen: torch.Generator) -> torch.Tensor:
    dims = tuple(range(1, x.ndim))
    lo = torch.amin(x, dim=dims, keepdim=True)
    hi = torch.amax(x, dim=dims, keepdim=True)
    scaled = (x - lo) / (hi - lo + _EPS)
    noisy = scaled + math.sqrt(_field(spec, "var")) * _normal_like(x, gen)
    return (hi - lo) * noisy + lo


JITTER_FACTORS = ("brightness", "contrast", "saturation", "hue")


def _color_jitter(x: torch.Tensor, spec: dict[str, Any], gen: torch.Generator) -> torch.Tensor:
    factors = [(JITTER_OPS[name], _field(spec, name)) for name in JITTER_FACTORS]
    order = torch.randperm(len(factors), generator=gen, device=gen.device).tolist()
    for i in order:
        op, factor = factors[i]
        x = op(x, factor)
    return x


# The four adjustments as torchvision's functional ops define them, on float N×C×H×W in
# [0, 1], written here so that a job with colour-jitter clients does not import torchvision
# (1.8 s a job on the 2-core machine); tests/data/test_client_transforms.py checks them
# against torchvision. One-channel images: brightness and contrast apply, the colour ops
# leave them unchanged (as torchvision does).
_GREY = (0.2989, 0.587, 0.114)


def _grey(x: torch.Tensor) -> torch.Tensor:
    if x.shape[1] == 1:
        return x
    r, g, b = x.unbind(1)
    return (_GREY[0] * r + _GREY[1] * g + _GREY[2] * b).unsqueeze(1)


def _blend(x: torch.Tensor, other: torch.Tensor, ratio: float) -> torch.Tensor:
    return (ratio * x + (1.0 - ratio) * other).clamp(0.0, 1.0)


def adjust_brightness(x: torch.Tensor, factor: float) -> torch.Tensor:
    return (x * factor).clamp(0.0, 1.0)


def adjust_contrast(x: torch.Tensor, factor: float) -> torch.Tensor:
    return _blend(x, _grey(x).mean(dim=(1, 2, 3), keepdim=True), factor)


def adjust_saturation(x: torch.Tensor, factor: float) -> torch.Tensor:
    return x if x.shape[1] == 1 else _blend(x, _grey(x), factor)


def adjust_hue(x: torch.Tensor, shift: float) -> torch.Tensor:
    """Rotate the hue by ``shift`` turns (HSV, hue in [0, 1))."""
    if x.shape[1] == 1 or shift == 0:
        return x
    h, s, v = _to_hsv(x)
    return _from_hsv(torch.remainder(h + shift, 1.0), s, v)


def _to_hsv(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    r, g, b = x.unbind(1)
    v, _ = x.max(dim=1)
    chroma = v - x.min(dim=1).values
    flat = chroma == 0
    s = torch.where(flat, torch.zeros_like(v), chroma / torch.where(flat, torch.ones_like(v), v))
    c = torch.where(flat, torch.ones_like(chroma), chroma)
    # the sector of the largest channel (red first on ties, then green), in sixths of a turn
    h = torch.where(
        v == r,
        torch.remainder((g - b) / c, 6.0),
        torch.where(v == g, (b - r) / c + 2.0, (r - g) / c + 4.0),
    )
    return torch.where(flat, torch.zeros_like(h), h / 6.0), s, v


def _from_hsv(h: torch.Tensor, s: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    sector = torch.floor(h * 6.0)
    f = h * 6.0 - sector
    i = sector.long() % 6
    p, q, t = v * (1.0 - s), v * (1.0 - s * f), v * (1.0 - s * (1.0 - f))
    # (r, g, b) per sector 0..5: (v,t,p) (q,v,p) (p,v,t) (p,q,v) (t,p,v) (v,p,q)
    table = torch.stack(
        [
            torch.stack([v, t, p], 1),
            torch.stack([q, v, p], 1),
            torch.stack([p, v, t], 1),
            torch.stack([p, q, v], 1),
            torch.stack([t, p, v], 1),
            torch.stack([v, p, q], 1),
        ],
        0,
    )
    return table.gather(0, i.unsqueeze(0).unsqueeze(2).expand(1, *table.shape[1:])).squeeze(0)


JITTER_OPS: dict[str, Callable[[torch.Tensor, float], torch.Tensor]] = {
    "brightness": adjust_brightness,
    "contrast": adjust_contrast,
    "saturation": adjust_saturation,
    "hue": adjust_hue,
}


_KINDS: dict[str, Callable[[torch.Tensor, dict[str, Any], torch.Generator], torch.Tensor]] = {
    "gaussian_noise": _gaussian_noise,
    "fedpce_noise": _fedpce_noise,
    "color_jitter": _color_jitter,
}


def _normal_like(x: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
    noise = torch.randn(x.shape, generator=gen, device=gen.device, dtype=x.dtype)
    return noise.to(x.device)


def _field(spec: dict[str, Any], key: str) -> float:
    value = spec.get(key)
    if not isinstance(value, int | float) or isinstance(value, bool):
        raise ValueError(f"client transform {spec.get('kind')!r}: key {key!r} is {value!r}")
    return float(value)

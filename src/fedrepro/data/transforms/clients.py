"""Per-client feature transforms named in the partition JSON (``client["transform"]``).

Applied to every batch a client reads (train and its local test), on float N×C×H×W images
in [0, 1], before any normalisation. Noise is fresh on every call, drawn from the caller's
``torch.Generator``, which lives on the batch's device (``fedrepro.device``).

Kinds:
  ``gaussian_noise`` {std}: x + std·ε, no clipping (NIID-Bench Gau(σ)).
  ``fedpce_noise`` {var}: per-image min-max scale to [0, 1], add N(0, var), scale back
  (FedPCE ``transform_image`` + ``DetAddGaussianNoise``).
  ``color_jitter`` {brightness, contrast, saturation, hue}: ``torchvision.transforms.v2.
  functional``'s adjust_* with these fixed factors, the four applied in a random order drawn
  per call (FedPCE ColorJitter clients).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch
import torchvision.transforms.v2.functional as TF

from fedrepro.data.transforms.views import JITTERS
from fedrepro.device import host_generator, on

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


def _color_jitter(x: torch.Tensor, spec: dict[str, Any], gen: torch.Generator) -> torch.Tensor:
    # torchvision's adjust_<name> (one-channel images: saturation and hue leave them as they are)
    factors = [(getattr(TF, f"adjust_{name}"), _field(spec, name)) for name in JITTERS]
    # the host decides which operation runs next: its companion draws the order (the
    # generator itself on the CPU), so a GPU step reads nothing back
    host = host_generator(gen)
    order = torch.randperm(len(factors), generator=host, device=on(host, "cpu")).tolist()
    for i in order:
        op, factor = factors[i]
        x = op(x, factor)
    return x


_KINDS: dict[str, Callable[[torch.Tensor, dict[str, Any], torch.Generator], torch.Tensor]] = {
    "gaussian_noise": _gaussian_noise,
    "fedpce_noise": _fedpce_noise,
    "color_jitter": _color_jitter,
}


def _normal_like(x: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
    return torch.randn(x.shape, generator=gen, device=on(gen, x.device), dtype=x.dtype)


def _field(spec: dict[str, Any], key: str) -> float:
    value = spec.get(key)
    if not isinstance(value, int | float) or isinstance(value, bool):
        raise ValueError(f"client transform {spec.get('kind')!r}: key {key!r} is {value!r}")
    return float(value)

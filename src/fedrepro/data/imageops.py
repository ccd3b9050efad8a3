"""Batched conversions between uint8 N×H×W×C image stacks and float N×C×H×W tensors."""

from __future__ import annotations

import torch
import torch.nn.functional as F

__all__ = ["resize_float", "resize_images", "to_float", "to_uint8"]

_CHUNK = 4096  # images per interpolate call, to bound float memory on large sets


def to_float(images: torch.Tensor) -> torch.Tensor:
    """uint8 N×H×W×C → float32 N×C×H×W in [0, 1]."""
    return images.permute(0, 3, 1, 2).float().div_(255.0)


def to_uint8(images: torch.Tensor) -> torch.Tensor:
    """float N×C×H×W in [0, 1] → uint8 N×H×W×C (rounded, clipped)."""
    return (
        images.mul(255.0).round_().clamp_(0, 255).to(torch.uint8).permute(0, 2, 3, 1).contiguous()
    )


def resize_float(images: torch.Tensor, size: int) -> torch.Tensor:
    """Antialiased bilinear resize of a float N×C×H×W batch to size×size."""
    if images.shape[-2:] == (size, size):
        return images
    return F.interpolate(
        images, size=(size, size), mode="bilinear", antialias=True, align_corners=False
    )


def resize_images(images: torch.Tensor, size: int) -> torch.Tensor:
    """Resize a uint8 N×H×W×C stack to size×size with antialiased bilinear interpolation."""
    if images.shape[1] == size and images.shape[2] == size:
        return images
    out = []
    for chunk in images.split(_CHUNK):
        out.append(to_uint8(resize_float(to_float(chunk), size).clamp_(0, 1)))
    if not out:
        return images.new_zeros((0, size, size, images.shape[3]))
    return torch.cat(out)

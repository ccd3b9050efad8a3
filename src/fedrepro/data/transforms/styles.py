"""FedIns's intra-client heterogeneity knob γ: part of each client's training images are
converted to other styles (FedIns §4.4, Fig. 5b; docs/methods/fedins.md).

The paper converts images "to other styles" with AdaIN style transfer (Geirhos et al.); its
supplement with the details is lost and the AdaIN encoder/decoder weights are not part of
this workflow. This module is the documented stand-in, used at every scale: a *pixel-space*
AdaIN. Style s is a target per-channel mean and standard deviation plus a low-frequency
texture drawn from a generator seeded with s; an image converted to style s has its
per-channel statistics replaced by the target ones and the texture blended in.

Assignment (our reading; the paper does not say what γ counts): with γ styles a client's
training images are split at random into γ + 1 equal groups; group 0 keeps its images and
group s is converted to style s. ``fraction`` overrides the converted share (then the
converted images are dealt evenly over the γ styles). Style 0 means "unchanged".
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

__all__ = ["assign_styles", "style_bank", "stylize", "stylize_split"]

TEXTURE_WEIGHT = 0.35
CHUNK = 1024  # images converted at a time
_TEXTURE_CELLS = 4
_EPS = 1e-5


def assign_styles(
    n: int, styles: int, rng: np.random.Generator, fraction: float | None = None
) -> np.ndarray:
    """A style id in 0..styles for each of ``n`` training images (0 = unchanged)."""
    if styles < 0:
        raise ValueError(f"partition: key 'styles' is {styles}; expected an integer >= 0")
    if styles == 0 or n == 0:
        return np.zeros(n, dtype=np.int64)
    share = styles / (styles + 1) if fraction is None else fraction
    if not 0.0 <= share <= 1.0:
        raise ValueError(f"partition: key 'styled_fraction' is {fraction}; expected 0..1")
    converted = int(round(share * n))
    ids = np.zeros(n, dtype=np.int64)
    ids[:converted] = 1 + np.arange(converted) % styles
    return rng.permutation(ids)


def style_bank(styles: int, channels: int = 3) -> dict[str, torch.Tensor]:
    """Targets of styles 1..styles (row s−1): mean and std per channel, a texture field."""
    means, stds, textures = [], [], []
    for s in range(1, styles + 1):
        gen = torch.Generator().manual_seed(7919 * s)
        means.append(0.2 + 0.6 * torch.rand(channels, generator=gen))
        stds.append(0.08 + 0.22 * torch.rand(channels, generator=gen))
        textures.append(torch.rand(channels, _TEXTURE_CELLS, _TEXTURE_CELLS, generator=gen))
    return {"mean": torch.stack(means), "std": torch.stack(stds), "texture": torch.stack(textures)}


def stylize(x: torch.Tensor, ids: torch.Tensor, bank: dict[str, torch.Tensor]) -> torch.Tensor:
    """Float images B×C×H×W in [0, 1] converted to their styles (``ids`` 0 = unchanged)."""
    out = x.clone()
    pick = ids > 0
    if not bool(pick.any()):
        return out
    src = x[pick]
    s = ids[pick] - 1
    mean = bank["mean"].to(x)[s][:, :, None, None]
    std = bank["std"].to(x)[s][:, :, None, None]
    mu = src.mean(dim=(2, 3), keepdim=True)
    sigma = src.std(dim=(2, 3), keepdim=True)
    adain = (src - mu) / (sigma + _EPS) * std + mean
    texture = F.interpolate(bank["texture"].to(x)[s], size=src.shape[-2:], mode="bilinear")
    out[pick] = ((1 - TEXTURE_WEIGHT) * adain + TEXTURE_WEIGHT * texture).clamp(0, 1)
    return out


def stylize_split(images: torch.Tensor, partition: dict, chunk: int = CHUNK) -> torch.Tensor:
    """uint8 N×H×W×C training images with every client's style assignment applied (a copy;
    ``images`` itself is returned when the partition converts nothing). Only the converted
    images are made float, ``chunk`` at a time, so the extra memory is the uint8 copy and one
    chunk (the whole split in float was 29-38 GB of GPU memory for Tiny-ImageNet)."""
    ids = torch.zeros(len(images), dtype=torch.long)
    for client in partition["clients"]:
        style = client.get("style")
        if style:
            ids[torch.as_tensor(client["train"], dtype=torch.long)] = torch.as_tensor(style)
    styles = int(ids.max()) if len(ids) else 0
    if styles == 0:
        return images
    bank = {k: v.to(images.device) for k, v in style_bank(styles, images.shape[-1]).items()}
    converted = ids.nonzero().flatten()  # on the host: once a job, before any step
    ids = ids.to(images.device)
    out = images.clone()
    for part in converted.to(images.device).split(chunk):
        x = images[part].permute(0, 3, 1, 2).float().div(255.0)
        y = stylize(x, ids[part], bank)
        out[part] = y.mul(255.0).round().to(torch.uint8).permute(0, 2, 3, 1)
    return out

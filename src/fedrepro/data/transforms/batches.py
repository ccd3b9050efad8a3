"""Turn device-resident uint8 images into model inputs, batch by batch.

Data stays on the device as uint8 N×H×W×C; every batch is gathered by index,
converted, resized, normalised and augmented with tensor ops, so there are no
DataLoader workers and no per-round copies.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from fedrepro.device import on

MEAN = (0.5, 0.5, 0.5)
STD = (0.5, 0.5, 0.5)


def to_input(
    images: torch.Tensor,
    size: int | None = None,
    channels: int = 3,
    mean: tuple[float, ...] = MEAN,
    std: tuple[float, ...] = STD,
) -> torch.Tensor:
    """uint8 B×H×W×C → float B×channels×size×size in [0, 1], not yet normalised."""
    x = images.permute(0, 3, 1, 2).float().div_(255.0)
    if x.shape[1] == 1 and channels == 3:
        x = x.expand(-1, 3, -1, -1)
    return resize(x, size)


def resize(x: torch.Tensor, size: int | None) -> torch.Tensor:
    """Bilinear resize of a float B×C×H×W batch to size×size (None or same size: as is)."""
    if size is not None and x.shape[-1] != size:
        x = F.interpolate(x, size=(size, size), mode="bilinear", align_corners=False)
    return x


def channel_stats(images: torch.Tensor, chunk: int = 4096):
    """Per-channel mean and std (population) of uint8 N×H×W×C images, in [0, 1], over every
    pixel of every image: what Rebuffi's ``decathlon_mean_std.pickle`` holds per dataset.
    Grey images give three equal values, as the pickle lists them (its MNIST, Omniglot).
    Accumulated in float64 by chunks, so large splits need little extra memory."""
    c = images.shape[-1]
    total = torch.zeros(c, dtype=torch.float64, device=images.device)
    squares = torch.zeros_like(total)
    for part in images.split(chunk):
        x = part.reshape(-1, c).to(torch.float64).div_(255.0)
        total += x.sum(0)
        squares += x.square().sum(0)
    n = images.numel() // c
    mean = total / n
    std = (squares / n - mean.square()).clamp_min(0.0).sqrt()
    mean, std = tuple(float(v) for v in mean), tuple(float(v) for v in std)
    return (mean * 3, std * 3) if c == 1 else (mean, std)


def normalize(x: torch.Tensor, mean=MEAN, std=STD) -> torch.Tensor:
    """Per-channel normalisation (the last step before the model). ``mean`` and ``std`` are
    tuples, or tensors on ``x``'s device (``stats_on``: made once per job, so a batch builds
    no tensor from Python values)."""
    if not isinstance(mean, torch.Tensor):
        mean, std = stats_on(mean, std, x.shape[1], x.device, x.dtype)
    return (x - mean) / std


def stats_on(mean, std, channels: int, device, dtype=torch.float32):
    """``mean`` and ``std`` of the first ``channels`` channels as 1×C×1×1 tensors on
    ``device``."""
    return tuple(
        torch.tensor(v[:channels], device=device, dtype=dtype).view(1, -1, 1, 1)
        for v in (mean, std)
    )


def augment(
    x: torch.Tensor,
    generator: torch.Generator,
    crop_pad: int = 0,
    flip: bool = False,
    rotate: float = 0.0,
    pad_mode: str = "zeros",
    flip_p: float = 0.5,
    rotate_p: float = 1.0,
    erase: dict | None = None,
) -> torch.Tensor:
    """Random crop after padding (``zeros`` as torchvision's ``RandomCrop(padding=p)``, or
    ``reflect`` as NIID-Bench's CIFAR-10 pipeline), horizontal flip (with probability
    ``flip_p``), rotation (``RandomRotation(rotate)``, applied with probability ``rotate_p``)
    and random erasing (``erase``: ``{p, scale}``, see ``erase_boxes``), per sample,
    vectorised, in torchvision's order. Each draws from ``generator`` only when enabled, so a
    run without it gets the same numbers as before."""
    n, _, h, w = x.shape
    dev = on(generator, x.device)  # a job's generator lives on its device: no copies
    if crop_pad > 0:
        mode = {"zeros": "constant", "reflect": "reflect"}[pad_mode]
        padded = F.pad(x, (crop_pad,) * 4, mode=mode)
        dy = torch.randint(0, 2 * crop_pad + 1, (n,), generator=generator, device=dev)
        dx = torch.randint(0, 2 * crop_pad + 1, (n,), generator=generator, device=dev)
        rows = (torch.arange(h, device=x.device)[None, :] + dy[:, None])[:, None, :, None]
        cols = (torch.arange(w, device=x.device)[None, :] + dx[:, None])[:, None, None, :]
        batch = torch.arange(n, device=x.device)[:, None, None, None]
        chans = torch.arange(x.shape[1], device=x.device)[None, :, None, None]
        x = padded[batch, chans, rows, cols]
    if flip:
        mask = torch.rand(n, generator=generator, device=dev) < flip_p
        x = torch.where(mask[:, None, None, None], x.flip(3), x)
    if rotate > 0:
        angles = rotation_angles(n, generator, rotate, dev)
        if rotate_p < 1.0:
            angles = angles * (torch.rand(n, generator=generator, device=dev) < rotate_p)
        x = rotate_images(x, angles)
    if erase is not None:
        x = x * ~erase_boxes(n, h, w, generator, **erase, device=dev)[:, None]
    return x


BOX_TRIES = 10  # torchvision's RandomErasing and RandomResizedCrop try 10 boxes each


def first_fitting_box(
    n: int, h: int, w: int, generator: torch.Generator | None, scale, ratio, fits, device="cpu"
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The box sides torchvision's ``RandomErasing`` and ``RandomResizedCrop`` draw for each
    of ``n`` H×W images: 10 tries of area U(scale)·H·W and
    log-uniform aspect ratio r, sides (√(area·r), √(area/r)) rounded, the first try for
    which ``fits(a, b)`` holds. Returns the two sides (the first try where none fits) and
    whether one fitted; drawn on ``generator``'s device (``device`` for the global one)."""
    dev = on(generator, device)
    tries = torch.rand(n, BOX_TRIES, generator=generator, device=dev)
    area = h * w * (scale[0] + (scale[1] - scale[0]) * tries)
    lo, hi = math.log(ratio[0]), math.log(ratio[1])
    aspect = torch.exp(lo + (hi - lo) * torch.rand(n, BOX_TRIES, generator=generator, device=dev))
    a, b = (area * aspect).sqrt().round(), (area / aspect).sqrt().round()
    ok = fits(a, b)
    first, rows = ok.float().argmax(1), torch.arange(n, device=dev)
    return a[rows, first], b[rows, first], ok.any(1)


def erase_boxes(
    n: int,
    h: int,
    w: int,
    generator: torch.Generator,
    p: float = 0.5,
    scale: tuple[float, float] = (0.02, 0.33),
    ratio: tuple[float, float] = (0.3, 3.3),
    device="cpu",
) -> torch.Tensor:
    """N×H×W masks of the boxes torchvision's ``RandomErasing(p, scale, ratio, value=0)``
    erases: with probability ``p`` a box of area U(scale)·H·W and log-uniform aspect ratio,
    the first of 10 tries that fits, at a uniform position (all False where none fits)."""
    dev = on(generator, device)
    bh, bw, found = first_fitting_box(
        n, h, w, generator, scale, ratio, lambda a, b: (a < h) & (b < w), dev
    )
    bh, bw = bh.long(), bw.long()
    use = found & (torch.rand(n, generator=generator, device=dev) < p)
    top = (torch.rand(n, generator=generator, device=dev) * (h - bh + 1).clamp(min=1)).floor()
    left = (torch.rand(n, generator=generator, device=dev) * (w - bw + 1).clamp(min=1)).floor()
    top, left = top.long(), left.long()
    ys = torch.arange(h, device=dev)[None, :]
    xs = torch.arange(w, device=dev)[None, :]
    in_rows = (ys >= top[:, None]) & (ys < (top + bh)[:, None])
    in_cols = (xs >= left[:, None]) & (xs < (left + bw)[:, None])
    return use[:, None, None] & in_rows[:, :, None] & in_cols[:, None, :]


def rotation_angles(
    n: int, generator: torch.Generator, degrees: float, device="cpu"
) -> torch.Tensor:
    """``n`` angles uniform in [−degrees, degrees], in degrees (``RandomRotation(degrees)``),
    on ``generator``'s device (``device`` for the global one)."""
    u = torch.rand(n, generator=generator, device=on(generator, device))
    return (u * 2.0 - 1.0) * float(degrees)


def rotate_images(x: torch.Tensor, degrees: torch.Tensor) -> torch.Tensor:
    """Rotate each image of a B×C×H×W batch counter-clockwise about its centre by its angle,
    nearest-neighbour with zero fill (torchvision's ``RandomRotation`` defaults)."""
    rad = degrees.to(x.dtype) * (math.pi / 180.0)
    cos, sin, zero = rad.cos(), rad.sin(), torch.zeros_like(rad)
    # affine_grid maps output to input coordinates (x right, y down): a counter-clockwise
    # turn of the image samples the input at the clockwise-turned position
    theta = torch.stack([torch.stack([cos, -sin, zero], 1), torch.stack([sin, cos, zero], 1)], 1)
    grid = F.affine_grid(theta, list(x.shape), align_corners=False)
    return F.grid_sample(x, grid, mode="nearest", padding_mode="zeros", align_corners=False)

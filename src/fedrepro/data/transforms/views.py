"""Contrastive views: the perturbations that make two views of one image differ (FedICON
§4.1.1 "an augmentation module ... that incorporates some perturbations"; SimCLR's and
SupCon's recipe: random resized crop, horizontal flip, colour jitter, grayscale).

Each image of a float B×C×H×W batch in [0, 1] gets its own random parameters, drawn from the
batch's generator, and the batch is processed at once on its device: the crops by
``torchvision.ops.roi_align`` (one box per image, bilinear, the image's size out), flip and
grayscale by ``torchvision.transforms.v2.functional`` on the whole batch, kept where drawn;
brightness, contrast and saturation blend each image with torchvision's targets (black, its
mean grey, its grey image) at its own factor, hue turns each image's hue by its own
amount, in a random order per image (``ColorJitter``). A spec (``train.views`` or an adapt
block's ``views``) names the perturbations to apply; a missing one is off:

    {"crop": {"scale": [0.2, 1.0], "ratio": [0.75, 1.333]}, "flip": 0.5,
     "jitter": {"p": 0.8, "brightness": 0.4, "contrast": 0.4, "saturation": 0.4, "hue": 0.1},
     "grayscale": 0.2}
"""

from __future__ import annotations

import torch
import torchvision.transforms.v2.functional as TF
from torchvision.ops import roi_align

from fedrepro.data.transforms.batches import first_fitting_box

Tensor = torch.Tensor
JITTERS = ("brightness", "contrast", "saturation", "hue")  # ColorJitter's, in its order


def perturb(x: Tensor, generator: torch.Generator | None, spec: dict) -> Tensor:
    """One random view of every image of ``x`` under ``spec`` (the module docstring)."""
    unknown = sorted(set(spec) - {"crop", "flip", "jitter", "grayscale"})
    if unknown:
        raise ValueError(f"views: unknown perturbation(s) {unknown}")
    n = x.shape[0]
    if spec.get("crop") is not None:  # torchvision's defaults where not given
        scale = spec["crop"].get("scale", (0.08, 1.0))
        ratio = spec["crop"].get("ratio", (3 / 4, 4 / 3))
        x = resized_crops(x, crop_boxes(n, *x.shape[-2:], generator, scale, ratio))
    if spec.get("flip"):
        x = torch.where(_drawn(n, spec["flip"], generator, x), TF.horizontal_flip(x), x)
    if spec.get("jitter") is not None:
        x = color_jitter(x, generator, **spec["jitter"])
    if spec.get("grayscale") and x.shape[1] == 3:
        gray = TF.rgb_to_grayscale(x, num_output_channels=3)
        x = torch.where(_drawn(n, spec["grayscale"], generator, x), gray, x)
    return x


def perturbs(spec: dict | None) -> bool:
    """Whether ``spec`` can change an image: a crop, or a flip, grayscale or colour jitter
    drawn with a probability above 0 (the jitter with a factor above 0)."""
    spec = spec or {}
    jitter = spec.get("jitter") or {}
    drawn = [spec.get("flip"), spec.get("grayscale")]
    if any(float(jitter.get(k) or 0) > 0 for k in JITTERS):
        drawn.append(jitter.get("p", 1.0))
    return spec.get("crop") is not None or any(float(p or 0) > 0 for p in drawn)


def _drawn(n: int, p: float, generator, like: Tensor) -> Tensor:
    """A B×1×1×1 mask, each image True with probability ``p``."""
    return (torch.rand(n, generator=generator) < float(p)).to(like.device)[:, None, None, None]


def crop_boxes(n: int, h: int, w: int, generator, scale, ratio) -> Tensor:
    """``n`` boxes (x1, y1, x2, y2) as ``RandomResizedCrop.get_params`` draws them: area
    U(scale)·H·W and log-uniform aspect ratio, the first of 10 tries that fits at a uniform
    integer position, else the centre crop with the ratio clamped to ``ratio``."""
    cw, ch, found = first_fitting_box(
        n, h, w, generator, scale, ratio,
        lambda a, b: (a > 0) & (a <= w) & (b > 0) & (b <= h),
    )  # fmt: skip
    if w / h < ratio[0]:
        fw, fh = w, round(w / ratio[0])
    elif w / h > ratio[1]:
        fw, fh = round(h * ratio[1]), h
    else:
        fw, fh = w, h
    cw, ch = torch.where(found, cw, float(fw)), torch.where(found, ch, float(fh))
    top = torch.floor(torch.rand(n, generator=generator) * (h - ch + 1))
    left = torch.floor(torch.rand(n, generator=generator) * (w - cw + 1))
    top = torch.where(found, top, torch.div(h - ch, 2, rounding_mode="floor"))
    left = torch.where(found, left, torch.div(w - cw, 2, rounding_mode="floor"))
    return torch.stack([left, top, left + cw, top + ch], 1)


def resized_crops(x: Tensor, boxes: Tensor) -> Tensor:
    """Each image's box (pixel-edge coordinates) resized bilinearly to the image's size."""
    index = torch.arange(len(x), dtype=x.dtype)[:, None]
    rois = torch.cat([index, boxes.to(x.dtype)], 1).to(x.device)
    return roi_align(x, rois, tuple(x.shape[-2:]), spatial_scale=1.0, aligned=True)


def color_jitter(
    x: Tensor,
    generator,
    p: float = 1.0,
    brightness: float = 0.0,
    contrast: float = 0.0,
    saturation: float = 0.0,
    hue: float = 0.0,
) -> Tensor:
    """``RandomApply([ColorJitter(brightness, contrast, saturation, hue)], p)`` per image:
    factors U[max(0, 1 − b), 1 + b] (hue U[−h, h]), the four in a random order per image."""
    n = x.shape[0]
    applied = torch.rand(n, generator=generator) < float(p)
    ranges = {"brightness": brightness, "contrast": contrast, "saturation": saturation,
              "hue": hue}  # fmt: skip
    factors = {}
    for name, r in ranges.items():
        u = torch.rand(n, generator=generator)
        if name == "hue":
            factors[name] = (2 * u - 1) * float(r)
        else:
            low = max(0.0, 1.0 - float(r))
            factors[name] = low + (1.0 + float(r) - low) * u
    order = torch.rand(n, len(JITTERS), generator=generator).argsort(1)
    ops = {"brightness": brightness_of, "contrast": contrast_of, "saturation": saturation_of,
           "hue": hue_of}  # fmt: skip
    for pos in range(len(JITTERS)):  # each image's pos-th operation, on those images only
        for k, name in enumerate(JITTERS):
            if not ranges[name] or (name in ("saturation", "hue") and x.shape[1] != 3):
                continue
            at = (applied & (order[:, pos] == k)).nonzero().flatten()
            if len(at):
                at_x = at.to(x.device)
                x = x.index_copy(0, at_x, ops[name](x[at_x], factors[name][at].to(x.device)))
    return x


def _per_image(f: Tensor, x: Tensor) -> Tensor:
    return f.to(x.dtype).view(-1, 1, 1, 1)


def brightness_of(x: Tensor, f: Tensor) -> Tensor:
    """``adjust_brightness`` at each image's factor: blended with black."""
    return (_per_image(f, x) * x).clamp(0.0, 1.0)


def contrast_of(x: Tensor, f: Tensor) -> Tensor:
    """``adjust_contrast`` at each image's factor: blended with its mean grey level."""
    grey = TF.rgb_to_grayscale(x) if x.shape[1] == 3 else x
    mean = grey.mean((-3, -2, -1), keepdim=True)
    f = _per_image(f, x)
    return (f * x + (1 - f) * mean).clamp(0.0, 1.0)


def saturation_of(x: Tensor, f: Tensor) -> Tensor:
    """``adjust_saturation`` at each image's factor: blended with its grey image."""
    f = _per_image(f, x)
    return (f * x + (1 - f) * TF.rgb_to_grayscale(x)).clamp(0.0, 1.0)


def hue_of(x: Tensor, shift: Tensor) -> Tensor:
    """``adjust_hue`` at each image's shift (in turns): each pixel's hue turned by it, its
    saturation and value kept."""
    value, largest = x.max(1)
    least = x.min(1).values
    chroma = value - least
    sat = torch.where(value > 0, chroma / value.clamp_min(1e-12), torch.zeros_like(value))
    r, g, b = x.unbind(1)
    c = chroma.clamp_min(1e-12)
    sextant = torch.stack([((g - b) / c) % 6, (b - r) / c + 2, (r - g) / c + 4], 1)
    h = sextant.gather(1, largest[:, None])[:, 0] / 6
    h = torch.where(chroma > 0, h, torch.zeros_like(h))
    h = (h + _per_image(shift, x)[:, 0]) % 1.0
    out = []
    for n in (5.0, 3.0, 1.0):  # R, G, B
        k = (n + 6 * h) % 6
        out.append(value - value * sat * torch.clamp(torch.minimum(k, 4 - k), 0.0, 1.0))
    return torch.stack(out, 1)

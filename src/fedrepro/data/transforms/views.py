"""Contrastive views: the perturbations that make two views of one image differ (FedICON
§4.1.1 "an augmentation module ... that incorporates some perturbations"; SimCLR's and
SupCon's recipe: random resized crop, horizontal flip, colour jitter, grayscale).

Each image of a float B×C×H×W batch in [0, 1] gets its own random parameters, drawn from the
batch's generator, and the batch is processed at once on its device: the crops by
``torchvision.ops.roi_align`` (one box per image, bilinear, the image's size out), flip and
grayscale by ``torchvision.transforms.v2.functional`` on the whole batch, kept where drawn;
brightness, contrast and saturation blend each image with torchvision's targets (black, its
mean grey, its grey image) at its own factor, hue turns each image's hue by its own
amount, in a random order per image (``ColorJitter``). ``draw`` draws a view's parameters
and ``apply`` applies them, so the views of one batch (``DeviceData.views_batch``) are drawn
one after the other, as separate calls would draw them, and perturbed in one pass. A spec
(``train.views`` or an adapt block's ``views``) names the perturbations to apply; a missing
one is off:

    {"crop": {"scale": [0.2, 1.0], "ratio": [0.75, 1.333]}, "flip": 0.5,
     "jitter": {"p": 0.8, "brightness": 0.4, "contrast": 0.4, "saturation": 0.4, "hue": 0.1},
     "grayscale": 0.2}
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torchvision.transforms.v2.functional as TF
from torchvision.ops import roi_align

from fedrepro.data.transforms.batches import first_fitting_box
from fedrepro.device import on, reads_are_free

Tensor = torch.Tensor
JITTERS = ("brightness", "contrast", "saturation", "hue")  # ColorJitter's, in its order


@dataclass
class ViewDraw:
    """The random parameters of one view of each of a batch's images (``draw``): a crop box,
    flip and grayscale masks, and the colour jitter's mask, factors and order, each None
    where ``spec`` leaves that perturbation off. ``cat`` stacks the draws of several
    batches, so ``apply`` perturbs them in one pass."""

    boxes: Tensor | None = None
    flip: Tensor | None = None
    jitter: tuple[Tensor, dict[str, Tensor], Tensor] | None = None
    grayscale: Tensor | None = None

    @staticmethod
    def cat(draws: list[ViewDraw]) -> ViewDraw:
        def joined(parts):
            return None if parts[0] is None else torch.cat(parts)

        jitter = None
        if draws[0].jitter is not None:
            applied, factors, order = zip(*(d.jitter for d in draws), strict=True)
            jitter = (
                torch.cat(applied),
                {name: torch.cat([f[name] for f in factors]) for name in factors[0]},
                torch.cat(order),
            )
        return ViewDraw(
            joined([d.boxes for d in draws]),
            joined([d.flip for d in draws]),
            jitter,
            joined([d.grayscale for d in draws]),
        )


def perturb(x: Tensor, generator: torch.Generator | None, spec: dict) -> Tensor:
    """One random view of every image of ``x`` under ``spec`` (the module docstring)."""
    return apply(x, draw(x.shape, generator, spec), spec)


def draw(shape: torch.Size, generator: torch.Generator | None, spec: dict) -> ViewDraw:
    """The parameters of one view of a B×C×H×W batch under ``spec``, drawn from
    ``generator`` in the order ``apply`` uses them: crop, flip, colour jitter, grayscale
    (three channels only)."""
    n, channels, h, w = shape
    unknown = sorted(set(spec) - {"crop", "flip", "jitter", "grayscale"})
    if unknown:
        raise ValueError(f"views: unknown perturbation(s) {unknown}")
    out = ViewDraw()
    if spec.get("crop") is not None:  # torchvision's defaults where not given
        scale = spec["crop"].get("scale", (0.08, 1.0))
        ratio = spec["crop"].get("ratio", (3 / 4, 4 / 3))
        out.boxes = crop_boxes(n, h, w, generator, scale, ratio)
    if spec.get("flip"):
        out.flip = _drawn(n, spec["flip"], generator)
    if spec.get("jitter") is not None:
        out.jitter = draw_jitter(n, generator, **spec["jitter"])
    if spec.get("grayscale") and channels == 3:
        out.grayscale = _drawn(n, spec["grayscale"], generator)
    return out


def apply(x: Tensor, drawn: ViewDraw, spec: dict) -> Tensor:
    """``x`` perturbed at the parameters ``drawn`` for its images (``draw``, ``ViewDraw.cat``)."""
    if drawn.boxes is not None:
        x = resized_crops(x, drawn.boxes)
    if drawn.flip is not None:
        x = torch.where(_mask(drawn.flip, x), TF.horizontal_flip(x), x)
    if drawn.jitter is not None:
        x = apply_jitter(x, drawn.jitter, spec["jitter"])
    if drawn.grayscale is not None:
        gray = TF.rgb_to_grayscale(x, num_output_channels=3)
        x = torch.where(_mask(drawn.grayscale, x), gray, x)
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


def _drawn(n: int, p: float, generator) -> Tensor:
    """Each of ``n`` images True with probability ``p``."""
    return torch.rand(n, generator=generator, device=on(generator, "cpu")) < float(p)


def _mask(drawn: Tensor, like: Tensor) -> Tensor:
    """A B×1×1×1 mask (drawn on ``like``'s device)."""
    return drawn[:, None, None, None]


def crop_boxes(n: int, h: int, w: int, generator, scale, ratio) -> Tensor:
    """``n`` boxes (x1, y1, x2, y2) as ``RandomResizedCrop.get_params`` draws them: area
    U(scale)·H·W and log-uniform aspect ratio, the first of 10 tries that fits at a uniform
    integer position, else the centre crop with the ratio clamped to ``ratio``."""
    dev = on(generator, "cpu")
    cw, ch, found = first_fitting_box(
        n, h, w, generator, scale, ratio,
        lambda a, b: (a > 0) & (a <= w) & (b > 0) & (b <= h), dev,
    )  # fmt: skip
    if w / h < ratio[0]:
        fw, fh = w, round(w / ratio[0])
    elif w / h > ratio[1]:
        fw, fh = round(h * ratio[1]), h
    else:
        fw, fh = w, h
    cw, ch = torch.where(found, cw, float(fw)), torch.where(found, ch, float(fh))
    top = torch.floor(torch.rand(n, generator=generator, device=dev) * (h - ch + 1))
    left = torch.floor(torch.rand(n, generator=generator, device=dev) * (w - cw + 1))
    top = torch.where(found, top, torch.div(h - ch, 2, rounding_mode="floor"))
    left = torch.where(found, left, torch.div(w - cw, 2, rounding_mode="floor"))
    return torch.stack([left, top, left + cw, top + ch], 1)


def resized_crops(x: Tensor, boxes: Tensor) -> Tensor:
    """Each image's box (pixel-edge coordinates) resized bilinearly to the image's size."""
    index = torch.arange(len(x), dtype=x.dtype, device=x.device)[:, None]
    rois = torch.cat([index, boxes.to(x.dtype)], 1)
    return roi_align(x, rois, tuple(x.shape[-2:]), spatial_scale=1.0, aligned=True)


def draw_jitter(
    n: int,
    generator,
    p: float = 1.0,
    brightness: float = 0.0,
    contrast: float = 0.0,
    saturation: float = 0.0,
    hue: float = 0.0,
) -> tuple[Tensor, dict[str, Tensor], Tensor]:
    """``RandomApply([ColorJitter(brightness, contrast, saturation, hue)], p)`` per image:
    which of ``n`` images it changes, each one's factors U[max(0, 1 − b), 1 + b] (hue
    U[−h, h]) and the random order of its four operations."""
    dev = on(generator, "cpu")
    applied = torch.rand(n, generator=generator, device=dev) < float(p)
    ranges = {"brightness": brightness, "contrast": contrast, "saturation": saturation,
              "hue": hue}  # fmt: skip
    factors = {}
    for name, r in ranges.items():
        u = torch.rand(n, generator=generator, device=dev)
        if name == "hue":
            factors[name] = (2 * u - 1) * float(r)
        else:
            low = max(0.0, 1.0 - float(r))
            factors[name] = low + (1.0 + float(r) - low) * u
    order = torch.rand(n, len(JITTERS), generator=generator, device=dev).argsort(1)
    return applied, factors, order


def apply_jitter(x: Tensor, drawn: tuple[Tensor, dict[str, Tensor], Tensor], spec: dict) -> Tensor:
    """The colour jitter of ``draw_jitter`` applied: each image's ``pos``-th operation in
    turn, on the images it applies to (an operation whose range ``spec`` sets to 0 is off).
    On a GPU each operation runs on the whole batch and is kept where drawn, so the host never
    reads which images take it; on the CPU, where that read is free and the whole batch costs
    three times as much, only those images are computed (``fedrepro.device.reads_are_free``).
    Per image the arithmetic is the same: both give the same numbers."""
    applied, factors, order = drawn
    ops = {"brightness": brightness_of, "contrast": contrast_of, "saturation": saturation_of,
           "hue": hue_of}  # fmt: skip
    subsets = reads_are_free(x)
    for pos in range(len(JITTERS)):  # each image's pos-th operation
        for k, name in enumerate(JITTERS):
            if not spec.get(name) or (name in ("saturation", "hue") and x.shape[1] != 3):
                continue
            chosen = applied & (order[:, pos] == k)
            if not subsets:
                x = torch.where(_mask(chosen, x), ops[name](x, factors[name]), x)
                continue
            at = chosen.nonzero().flatten()
            if len(at):
                x = x.index_copy(0, at, ops[name](x[at], factors[name][at]))
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
    saturation and value kept (the three channels at once: R, G, B are k = 5, 3, 1)."""
    value, largest = x.max(1, keepdim=True)
    chroma = value - x.min(1, keepdim=True).values
    sat = torch.where(value > 0, chroma / value.clamp_min(1e-12), torch.zeros_like(value))
    r, g, b = x.unbind(1)
    c = chroma[:, 0].clamp_min(1e-12)
    sextant = torch.stack([((g - b) / c) % 6, (b - r) / c + 2, (r - g) / c + 4], 1)
    h = sextant.gather(1, largest) / 6
    h = torch.where(chroma > 0, h, torch.zeros_like(h))
    h = (h + _per_image(shift, x)) % 1.0
    five_three_one = torch.arange(5, 0, -2, dtype=x.dtype, device=x.device).view(1, 3, 1, 1)
    k = (five_three_one + 6 * h) % 6
    return value - value * sat * torch.clamp(torch.minimum(k, 4 - k), 0.0, 1.0)

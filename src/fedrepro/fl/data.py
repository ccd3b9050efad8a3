"""Prepared splits held on the device, with the input settings every batch needs."""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from fedrepro.data.transforms.batches import (
    MEAN,
    STD,
    augment,
    normalize,
    resize,
    stats_on,
    to_input,
)
from fedrepro.data.transforms.views import ViewDraw, apply, draw, perturb, perturbs


@dataclass
class DeviceData:
    """One split on the device: uint8 images, int64 labels and how to feed them."""

    images: torch.Tensor
    labels: torch.Tensor
    img_size: int | None = None
    channels: int = 3
    crop_pad: int = 0
    pad_mode: str = "zeros"  # zeros | reflect
    augment_at: str = "input"  # input: after the resize to img_size; native: before it
    flip: bool = False
    rotate: float = 0.0  # degrees: RandomRotation(rotate)
    flip_p: float = 0.5  # probability of the horizontal flip
    rotate_p: float = 1.0  # probability of the rotation (FedPCE: 0.25)
    erase: dict | None = None  # RandomErasing {p, scale}: data.transforms.batches.erase_boxes
    mean: tuple[float, ...] = MEAN  # input normalisation (fedrepro.fl.build.input_stats)
    std: tuple[float, ...] = STD
    # the perturbations of a contrastive view (fedrepro.data.transforms.views; FedICON's two views)
    views: dict | None = None
    # the normalisation as device tensors, made with the split (a batch builds none from Python
    # values), and the class count once read
    _stats: dict = field(default_factory=dict, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        grey = self.images.ndim == 4 and self.images.shape[-1] == 1 and self.channels != 3
        channels = 1 if grey else 3
        key = (self.mean, self.std, channels, self.images.device, torch.float32)
        self._stats[key] = stats_on(self.mean, self.std, channels, self.images.device)

    def num_classes(self) -> int:
        """The labels' largest + 1 (0 without labels), read once."""
        if "classes" not in self._stats:
            self._stats["classes"] = int(self.labels.max()) + 1 if len(self.labels) else 0
        return self._stats["classes"]

    def stats(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``mean`` and ``std`` for a batch like ``x`` (its channels, device and dtype)."""
        key = (self.mean, self.std, x.shape[1], x.device, x.dtype)
        if key not in self._stats:
            self._stats[key] = stats_on(self.mean, self.std, x.shape[1], x.device, x.dtype)
        return self._stats[key]

    @property
    def side(self) -> int:
        """The side (px) of the model's inputs: ``img_size``, or the stored images' height."""
        return int(self.img_size or self.images.shape[1])

    @property
    def augments(self) -> bool:
        """Whether a training batch is augmented (else a sample's input is fixed by its index)."""
        return bool(self.crop_pad or self.flip or self.rotate or self.erase)

    @property
    def views_differ(self) -> bool:
        """Whether two contrastive views of one image can differ: perturbed by ``views``
        where it has them (one that perturbs nothing does not count), else augmented."""
        return perturbs(self.views) if self.views else self.augments

    def batch(
        self,
        idx: torch.Tensor,
        generator: torch.Generator | None = None,
        transform=None,
        train: bool = False,
        view: bool = False,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Inputs and labels for these indices; augmentation only when training. A
        contrastive ``view`` is perturbed by ``views`` (after any client transform) in place
        of the training augmentation, which every other training batch takes (FedICON's
        classifier batches: the run's augmentation, its contrastive views: the views')."""
        if view and self.views:
            return self.views_batch(idx, generator, transform, 1)
        augmenting = train and self.augments
        native = augmenting and self.augment_at == "native"
        x = to_input(self.images[idx], None if native else self.img_size, self.channels)
        if augmenting:
            x = augment(
                x,
                generator,
                self.crop_pad,
                self.flip,
                self.rotate,
                self.pad_mode,
                self.flip_p,
                self.rotate_p,
                self.erase,
            )
        if native:
            x = resize(x, self.img_size)
        if transform is not None:
            x = transform(x, generator)
        return normalize(x, *self.stats(x)), self.labels[idx]

    def views_batch(
        self, idx: torch.Tensor, generator: torch.Generator | None, transform, count: int
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``count`` contrastive views of these images stacked (rows i, i + B, …: image i) and
        their labels: the inputs ``count`` calls of ``batch(..., train=True, view=True)``
        give, from the same draws in the same order, each view's perturbations applied to
        all views in one pass (FedICON's views cost half the calls)."""
        if not self.views:  # the training augmentation, drawn per view
            x = [self.batch(idx, generator, transform, train=True)[0] for _ in range(count)]
            return torch.cat(x), self.labels[idx]
        base = to_input(self.images[idx], self.img_size, self.channels)
        inputs, draws = [], []
        for _ in range(count):
            x = base if transform is None else transform(base, generator)
            inputs.append(x)
            draws.append(draw(x.shape, generator, self.views))
        x = apply(torch.cat(inputs), ViewDraw.cat(draws), self.views)
        return normalize(x, *self.stats(x)), self.labels[idx]

    def view_of(self, x: torch.Tensor, generator: torch.Generator | None) -> torch.Tensor:
        """An augmented view of inputs ``x`` this data already prepared (normalised, at the
        input size), as ``batch`` draws a contrastive view: perturbed by ``views``, else the
        training augmentation applied to them again (FedICON's online test-time views)."""
        m, s = self.stats(x)
        raw = x * s + m
        if self.views:
            aug = perturb(raw, generator, self.views)
        else:
            aug = augment(raw, generator, self.crop_pad, self.flip, self.rotate, self.pad_mode,
                          self.flip_p, self.rotate_p, self.erase)  # fmt: skip
        return normalize(aug, m, s)

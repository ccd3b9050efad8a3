"""Prepared splits held on the device, with the input settings every batch needs."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from fedrepro.data.batches import MEAN, STD, augment, normalize, to_input


@dataclass
class DeviceData:
    """One split on the device: uint8 images, int64 labels and how to feed them."""

    images: torch.Tensor
    labels: torch.Tensor
    img_size: int | None = None
    channels: int = 3
    crop_pad: int = 0
    flip: bool = False
    rotate: float = 0.0  # degrees: RandomRotation(rotate)
    mean: tuple[float, ...] = MEAN  # input normalisation (fedrepro.fl.build.input_stats)
    std: tuple[float, ...] = STD

    def batch(
        self,
        idx: torch.Tensor,
        generator: torch.Generator | None = None,
        transform=None,
        train: bool = False,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Inputs and labels for these indices; augmentation only when training."""
        x = to_input(self.images[idx], self.img_size, self.channels)
        if train and (self.crop_pad or self.flip or self.rotate):
            x = augment(x, generator, self.crop_pad, self.flip, self.rotate)
        if transform is not None:
            x = transform(x, generator)
        return normalize(x, self.mean, self.std), self.labels[idx]

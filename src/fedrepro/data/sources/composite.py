"""Composite datasets (registry ``components``, e.g. FedPCE's ``digits``): every component
dataset becomes one domain, its images brought to the composite's size and channels.

A composite has no raw files of its own: at scale ``paper`` each component is parsed from
its own folder ``<data_root>/<component>/``, the sibling of ``<data_root>/<composite>/``."""

from __future__ import annotations

import os
from pathlib import Path

import torch

from fedrepro.data.prepared import Split
from fedrepro.data.sources.parsers import parse
from fedrepro.data.sources.registry import get_dataset, raw_sources

__all__ = ["parse_composite", "raw_sources", "to_channels"]


def to_channels(images: torch.Tensor, channels: int) -> torch.Tensor:
    """uint8 N×H×W×C with C = ``channels`` or 1; a single gray channel is repeated."""
    have = images.shape[-1]
    if have == channels:
        return images
    if have != 1:
        raise ValueError(f"cannot turn {have} channels into {channels}")
    return images.repeat(1, 1, 1, channels)


def parse_composite(
    name: str, raw_dir: str | os.PathLike[str], size: int | None = None
) -> dict[str, Split]:
    """Parse every component of ``name`` from ``Path(raw_dir).parent / <component>``, resize
    to ``size`` (default: the composite's ``image_size``), convert to its channels and
    concatenate per split, with component ``d`` as domain ``d``."""
    spec = get_dataset(name)
    if not spec.components:
        raise ValueError(f"{name} is not a composite dataset")
    size = size or spec.image_size
    root = Path(raw_dir).parent
    parts: dict[str, list[Split]] = {split: [] for split in spec.splits}
    for d, component in enumerate(spec.components):
        if list(get_dataset(component).classes) != list(spec.classes):
            raise ValueError(f"{name}: component {component} has other classes")
        for split, data in parse(component, root / component, size).items():
            if split not in parts:
                continue
            data.images = to_channels(data.images, spec.channels)
            data.domains = torch.full_like(data.labels, d)
            parts[split].append(data)
    out = {}
    for split, datas in parts.items():
        if len(datas) != len(spec.components):
            raise ValueError(f"{name}: not every component has a {split!r} split")
        out[split] = Split(
            images=torch.cat([p.images for p in datas]),
            labels=torch.cat([p.labels for p in datas]),
            domains=torch.cat([p.domains for p in datas if p.domains is not None]),
            classes=list(spec.classes),
            domain_names=list(spec.domains),
        )
        datas.clear()  # free the per-component copies before the next split is joined
    return out

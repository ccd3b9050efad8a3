"""Prepared split files (docs/contracts.md): uint8 images, int64 labels and optional domain
ids in one safetensors file, so a split loads straight into device memory."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field

import torch
from safetensors import safe_open
from safetensors.torch import load_file

from fedrepro.atomic import save_tensors

__all__ = ["Split", "load_split", "save_split"]


@dataclass
class Split:
    images: torch.Tensor  # uint8 N×H×W×C
    labels: torch.Tensor  # int64 N
    domains: torch.Tensor | None
    classes: list[str]
    domain_names: list[str]
    # files a split list names that were absent from the staged tree and left out (DomainNet)
    absent: list[str] = field(default_factory=list)


def save_split(path: str | os.PathLike[str], split: Split, meta: dict[str, str]) -> None:
    """Write atomically (temp file in the same directory, then ``os.replace``) so a killed
    job never leaves a file that looks finished. ``meta`` holds dataset/split/scale;
    ``classes`` and ``domain_names`` are taken from ``split``."""
    images, labels = split.images, split.labels
    if images.dtype != torch.uint8 or images.ndim != 4:
        raise ValueError(
            f"{path}: images must be uint8 N×H×W×C, got {images.dtype} {tuple(images.shape)}"
        )
    if labels.dtype != torch.int64 or labels.shape != images.shape[:1]:
        raise ValueError(f"{path}: labels must be int64 of length {images.shape[0]}")
    tensors = {"images": images.contiguous().cpu(), "labels": labels.contiguous().cpu()}
    if split.domains is not None:
        if split.domains.dtype != torch.int64 or split.domains.shape != labels.shape:
            raise ValueError(f"{path}: domains must be int64 of length {labels.shape[0]}")
        tensors["domains"] = split.domains.contiguous().cpu()
    metadata = {
        **{k: str(v) for k, v in meta.items()},
        "classes": json.dumps(list(split.classes)),
        "domain_names": json.dumps(list(split.domain_names)),
    }
    if split.absent:  # the record of what a split list named and the staged tree lacked
        metadata["absent"] = json.dumps(list(split.absent))
    save_tensors(path, tensors, metadata)


def load_split(path: str | os.PathLike[str], device: str | torch.device = "cpu") -> Split:
    """Load a prepared split onto ``device`` (tensors are created there directly)."""
    path = str(path)
    with safe_open(path, framework="pt") as handle:
        metadata = handle.metadata() or {}
    tensors = load_file(path, device=str(device))
    return Split(
        images=tensors["images"],
        labels=tensors["labels"],
        domains=tensors.get("domains"),
        classes=json.loads(metadata.get("classes", "[]")),
        domain_names=json.loads(metadata.get("domain_names", "[]")),
        absent=json.loads(metadata.get("absent", "[]")),
    )

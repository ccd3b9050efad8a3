"""Build the prepared split files of one dataset: synthesized at scale ``mini``, parsed
from raw files at scale ``paper``. The single library call behind ``prepare_data.py``."""

from __future__ import annotations

import os
from pathlib import Path

from fedrepro.data.composite import parse_composite
from fedrepro.data.parsers import parse
from fedrepro.data.prepared import Split, save_split
from fedrepro.data.registry import get_dataset
from fedrepro.data.synthetic import synthesize

__all__ = ["SCALES", "prepare"]

SCALES = ("mini", "paper")


def prepare(
    dataset: str,
    scale: str,
    out_dir: str | os.PathLike[str],
    raw_dir: str | os.PathLike[str] | None = None,
    per_class_train: int = 300,
    per_class_test: int = 100,
    size: int | None = None,
    seed: int = 0,
) -> list[Path]:
    """Write ``out_dir/<split>.safetensors`` for every split of ``dataset``; returns the paths.

    ``per_class_*`` and ``seed`` apply to the mini scale only; ``size`` resizes at both."""
    spec = get_dataset(dataset)
    if scale not in SCALES:
        raise ValueError(f"unknown scale {scale!r}; allowed: {', '.join(SCALES)}")
    meta = {"dataset": spec.name, "scale": scale}
    if scale == "mini":
        splits: dict[str, Split] = {
            split: synthesize(
                spec.name,
                split,
                per_class_train if split == "train" else per_class_test,
                size,
                seed,
            )
            for split in spec.splits
        }
        meta["seed"] = str(seed)
    else:
        if raw_dir is None:
            raise ValueError(f"{dataset}: scale 'paper' needs raw_dir (the downloaded files)")
        # a composite (e.g. digits) reads its components' folders beside raw_dir
        splits = (parse_composite if spec.components else parse)(spec.name, raw_dir, size)
    paths = []
    for split, data in splits.items():
        path = Path(out_dir) / f"{split}.safetensors"
        save_split(path, data, {**meta, "split": split})
        paths.append(path)
    return paths

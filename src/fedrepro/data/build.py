"""Build the prepared split files of one dataset: synthesized at scale ``mini``, parsed
from raw files at scale ``paper``. The single library call behind ``prepare_data.py``."""

from __future__ import annotations

import os
from pathlib import Path

from fedrepro.data.prepared import Split, save_split
from fedrepro.data.sources.composite import parse_composite
from fedrepro.data.sources.layouts import missing_files
from fedrepro.data.sources.parsers import parse
from fedrepro.data.sources.registry import get_dataset, split_sizes
from fedrepro.data.synthetic.analogs import synthesize

__all__ = ["SCALES", "check_prepared", "prepare"]

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
        try:
            splits = (parse_composite if spec.components else parse)(spec.name, raw_dir, size)
        except FileNotFoundError as err:  # name every raw file not staged, not the first
            absent = missing_files(spec.name, raw_dir)
            if not absent:
                raise
            raise FileNotFoundError(
                f"{err}; not staged ({len(absent)}): {', '.join(absent)} (nor a layout read in "
                "their place, docs/data.md)"
            ) from None
        check_prepared(spec.name, splits, size)
    paths = []
    for split, data in splits.items():
        path = Path(out_dir) / f"{split}.safetensors"
        save_split(path, data, {**meta, "split": split})
        paths.append(path)
    return paths


def check_prepared(dataset: str, splits: dict[str, Split], size: int | None = None) -> None:
    """Refuse parsed splits that differ from the registry, in one line naming every
    difference: the class count, the published images per split (a composite: per component
    domain) and the image shape (``size`` or the registry's side, its channels). A staged
    tree with extra class folders, a missing file or another release stops here."""
    spec = get_dataset(dataset)
    side = size or spec.image_size
    published = split_sizes(dataset) or {}
    wrong = []
    for split, data in splits.items():
        if len(data.classes) != spec.num_classes:
            wrong.append(
                f"{split}: {len(data.classes)} classes, the registry has {spec.num_classes}"
            )
        labels = data.labels
        if len(labels) and not 0 <= int(labels.min()) <= int(labels.max()) < spec.num_classes:
            wrong.append(f"{split}: labels outside 0..{spec.num_classes - 1}")
        shape = tuple(data.images.shape[1:])
        if shape != (side, side, spec.channels):
            wrong.append(f"{split}: images {'x'.join(map(str, shape))}, expected "
                         f"{side}x{side}x{spec.channels}")  # fmt: skip
        counts = {split: len(labels)}
        want = {split: published.get(split)}
        if "domains" in published and data.domains is not None:
            counts = {d: int((data.domains == i).sum()) for i, d in enumerate(spec.domains)}
            want = {d: published["domains"][d].get(split) for d in spec.domains}
        wrong += [
            f"{split}: {key + ' ' if key != split else ''}{counts[key]:,} images, "
            f"published {want[key]:,}"
            for key in counts
            if want[key] is not None and counts[key] != want[key]
        ]
    if wrong:
        raise ValueError(
            f"{dataset}: the prepared data differ from the registry: {'; '.join(wrong)}"
        )

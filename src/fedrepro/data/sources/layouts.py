"""Staged layouts that a parser reads in place of a registry file (an extracted archive, a
dataset's other release), recognised and checked by their content, so that the download
step accepts every layout that preparation reads, and says what is missing when none is."""

from __future__ import annotations

import re
import zipfile
from collections.abc import Callable
from pathlib import Path

import scipy.io

from fedrepro.data.sources.parsers import (
    class_folder_files,
    find,
    image_files,
    mnistm_original_listing,
    near_folders,
    tiny_listing,
)
from fedrepro.data.sources.registry import (
    DatasetSpec,
    RemoteFile,
    get_dataset,
    raw_sources,
    split_sizes,
)

__all__ = ["alternative", "missing_files", "staged"]

Check = Callable[[DatasetSpec, RemoteFile, Path], Path | None]


def _split_of(remote: RemoteFile) -> str:
    """The split a per-split file holds (``train`` or ``test`` in its name)."""
    found = re.search(r"(train|test)", remote.filename)
    if found is None:
        raise ValueError(f"{remote.dataset}: {remote.filename} names no split")
    return found.group(1)


def _refuse(remote: RemoteFile, path: Path, why: str) -> None:
    raise ValueError(
        f"{remote.dataset}: {path} is staged in place of {remote.filename} but {why}; stage "
        f"{remote.filename} or a complete copy (docs/data.md)"
    )


def _counted(spec: DatasetSpec, remote: RemoteFile, path: Path, split: str, n: int) -> None:
    """A split's image count against the registry's published one, where it records one."""
    want = (split_sizes(spec.name) or {}).get(split)
    if want is not None and n != want:
        _refuse(remote, path, f"its {split} split holds {n:,} images, published {want:,}")


def _tinyimagenet(spec: DatasetSpec, remote: RemoteFile, raw_dir: Path) -> Path | None:
    """The extracted ``tiny-imagenet-200/`` tree: 200 class folders, 100,000 + 10,000 images."""
    try:
        root = find(raw_dir, "tiny-imagenet-200")
    except FileNotFoundError:
        return None
    if not (root / "train").is_dir():
        return None
    wnids, listing = tiny_listing(root)
    if len(wnids) != spec.num_classes:
        _refuse(remote, root, f"train/ holds {len(wnids)} class folders, not {spec.num_classes}")
    for split, (paths, _) in listing.items():
        _counted(spec, remote, root, split, len(paths))
    return root


def _mnistm(spec: DatasetSpec, remote: RemoteFile, raw_dir: Path) -> Path | None:
    """MNIST-M's split as a torch file, as the original release (a labels file naming the
    images of the folder beside it) or as a class-folder tree ``mnist_m/<split>/<digit>/``."""
    split = _split_of(remote)
    try:
        path = find(raw_dir, f"mnist_m_{split}.pt")
    except FileNotFoundError:
        pass
    else:
        if not zipfile.is_zipfile(path):
            _refuse(remote, path, "it is not a file written by torch.save")
        return path
    try:
        paths, labels = mnistm_original_listing(raw_dir, split)
    except FileNotFoundError:
        pass
    else:
        absent = [p.name for p in paths if not p.is_file()]
        if absent or not paths or not set(labels) <= set(range(10)):
            why = f"{len(absent):,} listed images are absent" if absent else "labels not 0-9"
            _refuse(remote, paths[0].parent if paths else raw_dir, why)
        return paths[0].parent
    try:
        tree = find(raw_dir, "mnist_m") / split
        paths, _ = class_folder_files(tree, spec.classes)
    except FileNotFoundError:
        return None
    if not paths:
        _refuse(remote, tree, "its digit folders hold no images")
    return tree


def _synthdigits(spec: DatasetSpec, remote: RemoteFile, raw_dir: Path) -> Path | None:
    """FedBN's SynthDigits ``synth_<split>_32x32.mat``: X 32×32×3×N and N labels."""
    try:
        path = find(raw_dir, f"synth_{_split_of(remote)}_32x32.mat")
    except FileNotFoundError:
        return None
    try:
        shapes = {name: shape for name, shape, _ in scipy.io.whosmat(path)}
    except (ValueError, OSError) as err:
        _refuse(remote, path, f"it is not a .mat file ({err})")
    x, y = shapes.get("X"), shapes.get("y")
    if x is None or y is None or x[:3] != (32, 32, 3) or max(y) != x[3]:
        _refuse(remote, path, f"it holds {shapes}, not X 32x32x3xN and N labels y")
    return path


def _domain_folder(spec: DatasetSpec, remote: RemoteFile, raw_dir: Path) -> Path | None:
    """A domain's extracted folder (``<domain>/<class>/`` for every class, with images) in
    place of its zip, up to two levels below the dataset's folder."""
    domain = remote.filename.removesuffix(".zip")
    if domain not in spec.domains:
        return None
    for cand in near_folders(raw_dir):
        folder = cand / domain
        if folder.is_dir():
            empty = [
                c for c in spec.classes if not (folder / c).is_dir() or not image_files(folder / c)
            ]
            if empty:
                _refuse(remote, folder, f"it has no images of {', '.join(empty)}")
            return folder
    return None


_CHECKS: dict[str, Check] = {
    "tinyimagenet": _tinyimagenet,
    "mnistm": _mnistm,
    "synthdigits": _synthdigits,
    "domain_tree": _domain_folder,
}


def alternative(spec: DatasetSpec, remote: RemoteFile, raw_dir: str | Path) -> Path | None:
    """The staged file or folder that stands in for ``remote`` of ``spec`` in ``raw_dir`` (a
    layout its parser reads), or None where none is staged. A layout staged with the wrong
    content is refused in one line (a ValueError naming it and what is wrong)."""
    check = _CHECKS.get(spec.parser)
    return check(spec, remote, Path(raw_dir)) if check else None


def staged(spec: DatasetSpec, remote: RemoteFile, raw_dir: str | Path) -> bool:
    """Whether ``raw_dir`` holds ``remote`` by name (the file, its decompressed name, its
    extracted folder) or a layout standing in for it (checked by content)."""
    raw_dir = Path(raw_dir)
    names = [remote.filename, remote.content_filename, remote.extracted]
    return (
        any((raw_dir / n).exists() for n in names if n)
        or alternative(spec, remote, raw_dir) is not None
    )


def missing_files(dataset: str, raw_dir: str | Path) -> list[str]:
    """Every raw file ``dataset`` is prepared from that is not staged (by name or as a layout
    standing in for it), as ``<folder>/<file>``; a composite's components beside ``raw_dir``."""
    raw_dir = Path(raw_dir)
    out = []
    for name in raw_sources(dataset):
        folder = raw_dir if name == dataset else raw_dir.parent / name
        spec = get_dataset(name)
        out += [str(folder / r.filename) for r in spec.remote if not staged(spec, r, folder)]
    return out

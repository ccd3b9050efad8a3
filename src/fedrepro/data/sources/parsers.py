"""Raw dataset files → prepared ``Split``s (uint8 N×H×W×C, int64 labels).

One parser per file format, chosen by the registry's ``parser`` key; ``parse`` is the
single entry point. Archives are read in place where cheap (CIFAR tar.gz, liyxi .pt
archives) and extracted once into ``raw_dir`` otherwise (zips of JPEG trees).
"""

from __future__ import annotations

import bz2
import gzip
import io
import os
import tarfile
import zlib
from collections.abc import Callable
from pathlib import Path, PurePosixPath

import numpy as np
import scipy.io
import torch
from numpy.typing import ArrayLike

from fedrepro.data.imageops import resize_images
from fedrepro.data.prepared import Split
from fedrepro.data.sources.rawfiles import (
    extract_once,
    load_images,
    open_maybe_gzip,
    read_tar_member,
    safe_unpickle,
)
from fedrepro.data.sources.registry import CORRUPTIONS, DatasetSpec, get_dataset
from fedrepro.logs import job_log

__all__ = ["parse"]

_IMAGE_SUFFIXES = {".jpg", ".jpeg", ".png", ".bmp", ".ppm"}


def image_files(folder: Path) -> list[Path]:
    """The image files of ``folder`` in name order, by suffix, without macOS's AppleDouble
    ``._<name>`` resource files (an archive made on a Mac holds one beside every image, with
    the image's suffix but no image in it: PIL raised UnidentifiedImageError on them)."""
    return sorted(
        f
        for f in folder.iterdir()
        if f.suffix.lower() in _IMAGE_SUFFIXES and not f.name.startswith("._")
    )


def _split(
    images: np.ndarray, labels: ArrayLike, spec: DatasetSpec, classes: list[str] | None = None
) -> Split:
    """Wrap uint8 N×H×W[×C] images and integer labels as a single-domain ``Split``."""
    images = torch.from_numpy(np.require(images, np.uint8, ["C", "W"]))  # copies only if needed
    if images.ndim == 3:
        images = images.unsqueeze(-1)
    return Split(
        images=images,
        labels=torch.from_numpy(np.array(labels, dtype=np.int64).reshape(-1)),
        domains=None,
        classes=list(classes or spec.classes),
        domain_names=[],
    )


def find(raw_dir: Path, *names: str) -> Path:
    """First file or folder named like one of ``names`` in ``raw_dir`` or up to two levels
    below it (archives often add a top folder; deeper walks are slow on image trees)."""
    for pattern in ("{}", "*/{}", "*/*/{}"):
        for name in names:
            hits = sorted(raw_dir.glob(pattern.format(name)))
            if hits:
                return hits[0]
    raise FileNotFoundError(f"{raw_dir}: none of {', '.join(names)} found")


# --- CIFAR-10 / CIFAR-100 python pickles ---------------------------------------------------------


def _cifar_files(raw_dir: Path, archive: str, folder: str) -> dict[str, bytes]:
    """Read every file of the CIFAR python folder, from an extracted tree or the tar.gz."""
    try:
        root = find(raw_dir, folder)
        return {p.name: p.read_bytes() for p in root.iterdir() if p.is_file()}
    except FileNotFoundError:
        tar = find(raw_dir, archive)
    with tarfile.open(tar) as tf:
        out = {}
        for member in tf:
            if member.isfile() and PurePosixPath(member.name).parent.name == folder:
                handle = tf.extractfile(member)
                assert handle is not None
                out[PurePosixPath(member.name).name] = handle.read()
    return out


def _unpickle_dict(data: bytes) -> dict[str, object]:
    raw = safe_unpickle(io.BytesIO(data))
    return {(k.decode() if isinstance(k, bytes) else k): v for k, v in raw.items()}


def _cifar_batch(data: bytes, label_key: str) -> tuple[np.ndarray, np.ndarray]:
    batch = _unpickle_dict(data)
    flat = np.asarray(batch["data"], dtype=np.uint8)
    images = flat.reshape(-1, 3, 32, 32).transpose(0, 2, 3, 1)
    return images, np.asarray(batch[label_key], dtype=np.int64)


def _names(meta: dict[str, object], key: str) -> list[str]:
    names = meta[key]
    assert isinstance(names, list)
    return [n.decode() if isinstance(n, bytes) else str(n) for n in names]


# dataset: (archive, folder inside it, label key, meta file, class-name key, test file)
_CIFAR_LAYOUT = {
    "cifar10": ("cifar-10-python.tar.gz", "cifar-10-batches-py", "labels", "batches.meta",
                "label_names", "test_batch"),
    "cifar100": ("cifar-100-python.tar.gz", "cifar-100-python", "fine_labels", "meta",
                 "fine_label_names", "test"),
}  # fmt: skip


def _parse_cifar(raw_dir: Path, spec: DatasetSpec, size: int | None) -> dict[str, Split]:
    archive, folder, key, meta_name, names_key, test_name = _CIFAR_LAYOUT[spec.name]
    files = _cifar_files(raw_dir, archive, folder)
    batches = sorted((n for n in files if n.startswith("data_batch_")), key=_batch_no)
    train_names = batches or ["train"]  # CIFAR-10 ships 5 batches, CIFAR-100 one file
    classes = _names(_unpickle_dict(files[meta_name]), names_key) if meta_name in files else None
    out = {}
    for split, names in (("train", train_names), ("test", [test_name])):
        parts = [_cifar_batch(files[n], key) for n in names]
        images = np.concatenate([p[0] for p in parts])
        labels = np.concatenate([p[1] for p in parts])
        out[split] = _split(images, labels, spec, classes)
    return out


def _batch_no(name: str) -> int:
    return int(name.rsplit("_", 1)[1])


# --- IDX (MNIST, FashionMNIST) -------------------------------------------------------------------


def _read_idx(path: Path) -> np.ndarray:
    """IDX format: 2 zero bytes, a dtype code, the number of dims, big-endian int32 dims.

    The file may be gzip-compressed or not, whatever its name (see ``open_maybe_gzip``)."""
    base = path.name.removesuffix(".gz")
    fix = f"stage the official {base}.gz (any gzip of the same content) or the decompressed {base}"
    try:
        with open_maybe_gzip(path) as handle:
            data = handle.read()
    except (OSError, EOFError, zlib.error) as err:
        raise ValueError(f"{path}: unreadable gzip ({' '.join(str(err).split())}); {fix}") from None
    if len(data) < 4 or data[:2] != b"\x00\x00" or data[2] != 0x08:
        raise ValueError(
            f"{path}: not an unsigned-byte IDX file (starts {data[:4].hex() or 'empty'}); {fix}"
        )
    ndim = data[3]
    if len(data) < 4 + 4 * ndim:
        raise ValueError(f"{path}: IDX header cut short ({len(data)} bytes); {fix}")
    dims = tuple(int(d) for d in np.frombuffer(data, dtype=">i4", count=ndim, offset=4))
    body = len(data) - 4 - 4 * ndim
    if body != int(np.prod(dims)):
        raise ValueError(
            f"{path}: IDX header gives shape {dims} ({int(np.prod(dims))} bytes) but "
            f"{body} bytes follow; {fix}"
        )
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * ndim).reshape(dims)


def _parse_idx(raw_dir: Path, spec: DatasetSpec, size: int | None) -> dict[str, Split]:
    out = {}
    for split, prefix in (("train", "train"), ("test", "t10k")):
        images = _read_idx(
            find(raw_dir, f"{prefix}-images-idx3-ubyte.gz", f"{prefix}-images-idx3-ubyte")
        )
        labels = _read_idx(
            find(raw_dir, f"{prefix}-labels-idx1-ubyte.gz", f"{prefix}-labels-idx1-ubyte")
        )
        out[split] = _split(images, labels, spec)
    return out


# --- .mat files (SVHN, SynthDigits) --------------------------------------------------------------


def _read_digit_mat(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """SVHN-style .mat: X is 32×32×3×N, y holds 1..10 with 10 meaning digit 0."""
    mat = scipy.io.loadmat(path)
    images = np.asarray(mat["X"], dtype=np.uint8).transpose(3, 0, 1, 2)
    return images, np.asarray(mat["y"], dtype=np.int64).reshape(-1) % 10


def _parse_svhn(raw_dir: Path, spec: DatasetSpec, size: int | None) -> dict[str, Split]:
    return {
        split: _split(*_read_digit_mat(find(raw_dir, f"{split}_32x32.mat")), spec)
        for split in ("train", "test")
    }


def _tensor_pair(data: bytes) -> tuple[np.ndarray, np.ndarray]:
    """A torch-saved (images, labels) tuple, loaded with ``weights_only=True``."""
    images, labels = torch.load(io.BytesIO(data), weights_only=True, map_location="cpu")
    images = torch.as_tensor(images)
    if images.ndim == 4 and images.shape[1] in (1, 3) and images.shape[-1] not in (1, 3):
        images = images.permute(0, 2, 3, 1)
    return images.to(torch.uint8).numpy(), torch.as_tensor(labels).to(torch.int64).numpy()


def _parse_synthdigits(raw_dir: Path, spec: DatasetSpec, size: int | None) -> dict[str, Split]:
    out = {}
    for split in ("train", "test"):
        try:
            with gzip.open(find(raw_dir, f"synth_{split}.pt.gz"), "rb") as handle:
                images, labels = _tensor_pair(handle.read())
        except FileNotFoundError:
            images, labels = _read_digit_mat(find(raw_dir, f"synth_{split}_32x32.mat"))
        out[split] = _split(images, labels, spec)
    return out


# --- MNIST-M -------------------------------------------------------------------------------------


def mnistm_original_listing(raw_dir: Path, split: str) -> tuple[list[Path], list[int]]:
    """MNIST-M's original release: ``mnist_m_<split>_labels.txt`` rows ``<file> <digit>`` naming
    the images of the folder ``mnist_m_<split>/`` beside it."""
    listing = find(raw_dir, f"mnist_m_{split}_labels.txt")
    rows = [line.split() for line in listing.read_text().splitlines() if line.strip()]
    return [listing.parent / f"mnist_m_{split}" / row[0] for row in rows], [
        int(row[1]) for row in rows
    ]


def _mnistm_split(raw_dir: Path, split: str) -> tuple[np.ndarray, np.ndarray]:
    for finder in (
        lambda: find(raw_dir, f"mnist_m_{split}.pt").read_bytes(),
        lambda: read_tar_member(find(raw_dir, f"mnist_m_{split}.pt.tar.gz"), f"mnist_m_{split}.pt"),
    ):
        try:
            return _tensor_pair(finder())
        except FileNotFoundError:
            pass
    try:  # original release: mnist_m_<split>/ images + mnist_m_<split>_labels.txt
        paths, labels = mnistm_original_listing(raw_dir, split)
        return load_images(paths, None, what=f"mnistm {split}"), np.array(labels)
    except FileNotFoundError:
        pass
    root = find(raw_dir, "mnist_m") / split  # class-folder tree mnist_m/<split>/<digit>/
    paths, labels = class_folder_files(root)
    return load_images(paths, None, what=f"mnistm {split}"), np.asarray(labels)


def class_folder_files(
    root: Path, classes: tuple[str, ...] | None = None
) -> tuple[list[Path], list[int]]:
    """Image files of a ``root/<class>/`` tree and their labels: the folders ``classes`` in
    that order (each must exist), or every sub-folder in name order."""
    if not root.is_dir():
        raise FileNotFoundError(f"{root}: no such folder")
    if classes is None:
        folders = sorted(p for p in root.iterdir() if p.is_dir())
    else:
        missing = [c for c in classes if not (root / c).is_dir()]
        if missing:
            raise FileNotFoundError(f"{root}: no class folder(s) {', '.join(missing)}")
        folders = [root / c for c in classes]
    paths, labels = [], []
    for label, folder in enumerate(folders):
        files = image_files(folder)
        paths += files
        labels += [label] * len(files)
    return paths, labels


def _parse_mnistm(raw_dir: Path, spec: DatasetSpec, size: int | None) -> dict[str, Split]:
    """Any staged layout at one side: the original release is 32×32 (the registry's), liyxi's
    copy (made from keras_mnistm's 28×28 images) is resized to it."""
    out = {}
    for split in ("train", "test"):
        out[split] = _split(*_mnistm_split(raw_dir, split), spec)
        out[split].images = resize_images(out[split].images, size or spec.image_size)
    return out


# --- SYN: Roy et al.'s Synthetic Digits (FedPCE's SYN), a Kaggle folder tree ---------------------

# our split name -> the release's folder (the authors' code reads imgs_train and imgs_valid)
_SYN_FOLDERS = {"train": "imgs_train", "test": "imgs_valid"}


def _parse_syn_tree(raw_dir: Path, spec: DatasetSpec, size: int | None) -> dict[str, Split]:
    """``synthetic_digits/imgs_{train,valid}/<digit>/<image>``, from the staged folder or the
    staged zip (extracted once). No checksum is published: each split must hold the ten digit
    folders and exactly the registry's image count (§4.1: 10,000 and 2,000)."""
    try:
        root = find(raw_dir, "synthetic_digits")
    except FileNotFoundError:
        for archive in sorted(raw_dir.glob("*.zip")):
            extract_once(archive, raw_dir)
        try:
            root = find(raw_dir, "synthetic_digits")
        except FileNotFoundError:
            raise FileNotFoundError(
                f"{raw_dir}: no synthetic_digits/ folder (nor a .zip holding one); stage the "
                "Kaggle release prasunroy/synthetic-digits as synthetic_digits/"
                "imgs_{train,valid}/<0-9>/ there"
            ) from None
    out = {}
    for split, want in zip(spec.splits, spec.sizes, strict=True):
        tree = root / _SYN_FOLDERS[split]
        paths, labels = class_folder_files(tree, spec.classes)
        if len(paths) != want:
            raise ValueError(
                f"{tree}: {len(paths):,} images, expected {want:,} (Roy et al. 2018, as "
                "FedPCE §4.1 counts them); stage the Kaggle release prasunroy/synthetic-digits"
            )
        images = load_images(paths, size or spec.image_size, what=f"syn {split}")
        out[split] = _split(images, labels, spec)
    return out


# --- USPS (libsvm text, bz2) ---------------------------------------------------------------------


def _parse_usps(raw_dir: Path, spec: DatasetSpec, size: int | None) -> dict[str, Split]:
    out = {}
    for split, name in (("train", "usps.bz2"), ("test", "usps.t.bz2")):
        with bz2.open(find(raw_dir, name), "rt") as handle:
            lines = [line for line in handle if line.strip()]
        pixels = np.zeros((len(lines), 256), np.float32)  # absent libsvm entries are 0
        labels = np.empty(len(lines), np.int64)
        for row, line in enumerate(lines):
            label, _, rest = line.partition(" ")
            labels[row] = int(float(label)) - 1  # 1..10 → 0..9
            pairs = np.array(rest.replace(":", " ").split(), np.float32).reshape(-1, 2)
            pixels[row, pairs[:, 0].astype(np.int64) - 1] = pairs[:, 1]
        # Same mapping as torchvision: [-1, 1] → [0, 255], truncated to uint8.
        images = ((pixels + 1) / 2 * 255).astype(np.uint8).reshape(-1, 16, 16)
        out[split] = _split(images, labels, spec)
    return out


# --- Tiny-ImageNet -------------------------------------------------------------------------------


def _tiny_root(raw_dir: Path) -> Path:
    try:
        return find(raw_dir, "tiny-imagenet-200")
    except FileNotFoundError:
        extract_once(find(raw_dir, "tiny-imagenet-200.zip"), raw_dir)
        return find(raw_dir, "tiny-imagenet-200")


def tiny_listing(root: Path) -> tuple[list[str], dict[str, tuple[list[Path], list[int]]]]:
    """The class folders (wnids, ImageFolder order) of an extracted ``tiny-imagenet-200`` tree
    and each split's image files and labels; test = the labelled val/ images."""
    wnids = sorted(p.name for p in (root / "train").iterdir() if p.is_dir())  # ImageFolder order
    index = {w: i for i, w in enumerate(wnids)}
    train_paths, train_labels = [], []
    for wnid in wnids:
        folder = root / "train" / wnid / "images"
        files = image_files(folder)
        train_paths += files
        train_labels += [index[wnid]] * len(files)
    annotations = root / "val" / "val_annotations.txt"
    if annotations.exists() and (root / "val" / "images").is_dir():
        # Raw layout: one flat folder; labels only in the annotations (the ImageFolder pitfall).
        rows = [line.split("\t") for line in annotations.read_text().splitlines() if line.strip()]
        rows.sort(key=lambda r: r[0])
        val_paths = [root / "val" / "images" / r[0] for r in rows]
        val_labels = [index[r[1]] for r in rows]
    else:  # already re-foldered by class: val/<wnid>/[images/]*.JPEG
        val_paths, val_labels = [], []
        for wnid in wnids:
            folder = root / "val" / wnid
            folder = folder / "images" if (folder / "images").is_dir() else folder
            files = image_files(folder)
            val_paths += files
            val_labels += [index[wnid]] * len(files)
    return wnids, {"train": (train_paths, train_labels), "test": (val_paths, val_labels)}


def _parse_tinyimagenet(raw_dir: Path, spec: DatasetSpec, size: int | None) -> dict[str, Split]:
    wnids, listing = tiny_listing(_tiny_root(raw_dir))
    side = size or spec.image_size
    return {
        split: _split(load_images(paths, side, what=f"tinyimagenet {split}"), labels, spec, wnids)
        for split, (paths, labels) in listing.items()
    }


# --- multi-domain folder trees (DomainNet subset, Office-Caltech-10) -----------------------------


def near_folders(raw_dir: Path) -> list[Path]:
    """``raw_dir`` and the folders one and two levels below it (archives often add a top
    folder), where a staged tree may start."""
    return [raw_dir, *raw_dir.glob("*/"), *raw_dir.glob("*/*/")]


def _domain_root(raw_dir: Path, spec: DatasetSpec) -> Path | None:
    """Directory holding one sub-folder per domain, searched two levels deep."""
    for cand in near_folders(raw_dir):
        if all((cand / d).is_dir() for d in spec.domains):
            return cand
    return None


def _extract_domain_archives(raw_dir: Path, spec: DatasetSpec) -> None:
    wanted = set(spec.classes)

    def keep(name: str) -> bool:  # only the subset's classes, plus split files
        parts = PurePosixPath(name).parts
        return name.endswith(".pkl") or any(p in wanted for p in parts)

    for archive in sorted(raw_dir.glob("*.zip")):
        extract_once(archive, raw_dir, keep)


def _split_lists(raw_dir: Path, domain: str) -> dict[str, list[tuple[str, str]]] | None:
    """FedBN ``{domain}_{train,test}.pkl`` as ordered (relative key, class) lists, if staged."""
    lists = {}
    for split in ("train", "test"):
        try:
            path = find(raw_dir, f"{domain}_{split}.pkl")
        except FileNotFoundError:
            return None
        with open(path, "rb") as handle:
            paths, labels = safe_unpickle(handle)
        lists[split] = [
            ("/".join(PurePosixPath(str(p)).parts[-3:]), str(lab))
            for p, lab in zip(paths, labels, strict=True)
        ]
    return lists


def _default_split_lists(
    root: Path, domain: str, classes: tuple[str, ...]
) -> dict[str, list[tuple[str, str]]]:
    """Deterministic 80/20 split per (domain, class) when no FedBN split file is staged."""
    lists: dict[str, list[tuple[str, str]]] = {"train": [], "test": []}
    for cls in classes:
        folder = root / domain / cls
        if not folder.is_dir():
            continue
        files = [f.name for f in image_files(folder)]
        rng = np.random.default_rng(zlib.crc32(f"{domain}/{cls}".encode()))
        order = rng.permutation(len(files))
        cut = int(round(0.8 * len(files)))
        for split, idx in (("train", order[:cut]), ("test", order[cut:])):
            lists[split] += [(f"{domain}/{cls}/{files[i]}", cls) for i in sorted(idx)]
    return lists


def _parse_domain_tree(raw_dir: Path, spec: DatasetSpec, size: int | None) -> dict[str, Split]:
    root = _domain_root(raw_dir, spec)
    if root is None:
        _extract_domain_archives(raw_dir, spec)
        root = _domain_root(raw_dir, spec)
    if root is None:
        raise FileNotFoundError(
            f"{raw_dir}: expected folders {'/'.join(spec.domains)} each holding <class>/*.jpg"
        )
    index = {c: i for i, c in enumerate(spec.classes)}
    parts: dict[str, list[tuple[np.ndarray, list[int], int]]] = {"train": [], "test": []}
    side = size or spec.image_size
    lists = {
        domain: _split_lists(raw_dir, domain) or _default_split_lists(root, domain, spec.classes)
        for domain in spec.domains
    }
    absent = _absent_listed(root, spec, lists)
    for d, domain in enumerate(spec.domains):
        for split, rows in lists[domain].items():
            rows = [row for row in rows if row[0] not in absent[split]]
            paths = [root / key for key, _ in rows]
            images = load_images(paths, side, what=f"{spec.name} {domain} {split}")
            parts[split].append((images, [index[c] for _, c in rows], d))
    out = {}
    for split, chunks in parts.items():
        split_ = _split(
            np.concatenate([c[0] for c in chunks]), sum((c[1] for c in chunks), []), spec
        )
        split_.domains = torch.cat(
            [torch.full((len(c[1]),), c[2], dtype=torch.int64) for c in chunks]
        )
        split_.domain_names = list(spec.domains)
        split_.absent = sorted(absent[split])
        out[split] = split_
    return out


def _absent_listed(
    root: Path, spec: DatasetSpec, lists: dict[str, dict[str, list[tuple[str, str]]]]
) -> dict[str, set[str]]:
    """The files a split list names that the staged tree lacks, per split: logged by name and
    left out, or refused in one line above the registry's ``absent_allowed`` (FedBN's DomainNet
    pickles list 33 files the cleaned clipart and painting zips dropped)."""
    absent: dict[str, set[str]] = {"train": set(), "test": set()}
    for rows in lists.values():
        for split, listed in rows.items():
            absent[split] |= {key for key, _ in listed if not (root / key).is_file()}
    names = sorted(set().union(*absent.values()))
    if len(names) > spec.absent_allowed:
        shown = ", ".join(names[:20]) + (
            f" and {len(names) - 20:,} more" if len(names) > 20 else ""
        )
        raise FileNotFoundError(
            f"{root}: {len(names):,} files listed by the split files are absent (at most "
            f"{spec.absent_allowed} may be: {spec.absent_why or 'none known'}): {shown}"
        )
    for name in names:
        job_log(f"{spec.name}: listed but absent, left out: {name}")
    if names:
        job_log(f"{spec.name}: {len(names)} listed files absent (at most {spec.absent_allowed})")
    return absent


# --- CIFAR-10-C and CIFAR-10.1 -------------------------------------------------------------------


def _parse_cifar10c(raw_dir: Path, spec: DatasetSpec, size: int | None) -> dict[str, Split]:
    try:
        root = find(raw_dir, "labels.npy").parent
    except FileNotFoundError:
        names = {f"{c}.npy" for c in CORRUPTIONS} | {"labels.npy"}
        extract_once(
            find(raw_dir, "CIFAR-10-C.tar"), raw_dir, lambda n: PurePosixPath(n).name in names
        )
        root = find(raw_dir, "labels.npy").parent
    labels = np.load(root / "labels.npy").astype(np.int64)
    per_severity = len(labels) // 5
    images = np.empty((len(CORRUPTIONS) * len(labels), 32, 32, 3), np.uint8)
    for c, name in enumerate(CORRUPTIONS):
        images[c * len(labels) : (c + 1) * len(labels)] = np.load(
            root / f"{name}.npy", mmap_mode="r"
        )
    severity = np.arange(len(labels)) // per_severity  # severity 1 first, as published
    split = _split(images, np.tile(labels, len(CORRUPTIONS)), spec)
    split.domains = torch.as_tensor(
        (np.arange(len(CORRUPTIONS))[:, None] * 5 + severity[None, :]).reshape(-1),
        dtype=torch.int64,
    )
    split.domain_names = list(spec.domains)
    return {"test": split}


def _parse_cifar101(raw_dir: Path, spec: DatasetSpec, size: int | None) -> dict[str, Split]:
    images = np.load(find(raw_dir, "cifar10.1_v6_data.npy"))
    labels = np.load(find(raw_dir, "cifar10.1_v6_labels.npy"))
    return {"test": _split(images, labels, spec)}


_PARSERS: dict[str, Callable[[Path, DatasetSpec, int | None], dict[str, Split]]] = {
    "cifar": _parse_cifar,
    "idx": _parse_idx,
    "svhn": _parse_svhn,
    "usps": _parse_usps,
    "synthdigits": _parse_synthdigits,
    "syn_tree": _parse_syn_tree,
    "mnistm": _parse_mnistm,
    "tinyimagenet": _parse_tinyimagenet,
    "domain_tree": _parse_domain_tree,
    "cifar10c": _parse_cifar10c,
    "cifar101": _parse_cifar101,
}


def parse(name: str, raw_dir: str | os.PathLike[str], size: int | None = None) -> dict[str, Split]:
    """Read the raw files of dataset ``name`` from ``raw_dir`` into one ``Split`` per split.

    ``size`` resizes every image to size×size (folder trees default to the registry's
    ``image_size``; fixed-size formats keep their native size when ``size`` is None)."""
    spec = get_dataset(name)
    if not spec.parser:
        raise ValueError(f"{name} is synthetic only (scale: mini); it has no raw files to parse")
    splits = _PARSERS[spec.parser](Path(raw_dir), spec, size)
    if size is not None:
        for split in splits.values():
            split.images = resize_images(split.images, size)
    return splits

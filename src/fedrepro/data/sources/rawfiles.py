"""Low-level readers for raw dataset files: restricted unpickling, safe archive extraction
and image-file decoding. Kept apart from the per-format parsers they serve."""

from __future__ import annotations

import gzip
import io
import pickle
import tarfile
import zipfile
from collections.abc import Callable, Sequence
from pathlib import Path, PurePosixPath
from typing import Any, BinaryIO

import numpy as np
from PIL import Image

from fedrepro.checksums import is_gzip
from fedrepro.logs import Progress

__all__ = ["extract_once", "load_images", "open_maybe_gzip", "read_tar_member", "safe_unpickle"]

# Globals a CIFAR batch or a FedBN split pickle may reference: numpy array reconstruction
# only. Anything else (os.system, eval, ...) is refused, so a tampered pickle cannot run code.
_ALLOWED_GLOBALS = {
    ("numpy._core.multiarray", "_reconstruct"),
    ("numpy._core.multiarray", "scalar"),
    ("numpy._core.numeric", "_frombuffer"),
    ("numpy", "ndarray"),
    ("numpy", "dtype"),
    ("_codecs", "encode"),
}


class _RestrictedUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        module = module.replace("numpy.core", "numpy._core", 1)
        if (module, name) not in _ALLOWED_GLOBALS:
            raise pickle.UnpicklingError(f"refusing to unpickle global {module}.{name}")
        return super().find_class(module, name)


def safe_unpickle(handle: BinaryIO) -> Any:
    """Unpickle Python-2-era data files (latin1 strings) allowing only numpy globals."""
    return _RestrictedUnpickler(handle, encoding="latin1").load()


def _safe_member(name: str) -> bool:
    path = PurePosixPath(name)
    return not path.is_absolute() and ".." not in path.parts


def extract_once(
    archive: Path, dest: Path, keep: Callable[[str], bool] = lambda name: True
) -> None:
    """Extract the members of a zip/tar ``archive`` accepted by ``keep`` into ``dest``.

    A marker file written after the last member makes reruns free and means an
    interrupted extraction is redone rather than trusted."""
    marker = dest / f".{archive.name}.extracted"
    if marker.exists():
        return
    dest.mkdir(parents=True, exist_ok=True)
    if zipfile.is_zipfile(archive):
        with zipfile.ZipFile(archive) as zf:
            names = [n for n in zf.namelist() if _safe_member(n) and keep(n)]
            zf.extractall(dest, members=names)
    else:
        with tarfile.open(archive) as tf:
            members = [m for m in tf.getmembers() if _safe_member(m.name) and keep(m.name)]
            tf.extractall(dest, members=members, filter="data")
    marker.touch()


def open_maybe_gzip(path: Path) -> io.BufferedIOBase:
    """Open ``path`` for reading, decompressing it when it is gzip. Decided by the magic
    bytes, not the name: a file may be staged decompressed under its ``.gz`` name (browsers
    and some mirrors decompress on the fly) or compressed without it."""
    return gzip.open(path, "rb") if is_gzip(path) else open(path, "rb")


def read_tar_member(archive: Path, basename: str) -> bytes:
    """Bytes of the first member of a tar archive whose file name is ``basename``."""
    with tarfile.open(archive) as tf:
        for member in tf:
            if member.isfile() and PurePosixPath(member.name).name == basename:
                extracted = tf.extractfile(member)
                assert extracted is not None
                return extracted.read()
    raise FileNotFoundError(f"{archive}: no member named {basename}")


def load_images(
    paths: Sequence[Path], size: int | None, channels: int = 3, what: str = "decoded"
) -> np.ndarray:
    """Decode image files to uint8 N×size×size×C (each resized with PIL's antialiased
    bilinear filter, since source images differ in size); the job's log shows how many are
    done (``what``: which images)."""
    mode = "RGB" if channels == 3 else "L"
    out: list[np.ndarray] = []
    progress = Progress(what, len(paths), "images")
    for path in paths:
        with Image.open(path) as img:
            img = img.convert(mode)
            if size is not None and img.size != (size, size):
                img = img.resize((size, size), Image.Resampling.BILINEAR)
            out.append(np.asarray(img, dtype=np.uint8))
        progress.add(1)  # once decoded: the rate and the time left are the decoder's
    if not out:
        side = size or 0
        return np.zeros((0, side, side, channels), np.uint8)
    stacked = np.stack(out)
    return stacked[..., None] if stacked.ndim == 3 else stacked

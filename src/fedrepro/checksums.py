"""File checksums for every layer: raw datasets and weight files are verified the same way."""

from __future__ import annotations

import gzip
import hashlib
import os
import zlib

CHUNK = 1 << 20
GZIP_MAGIC = b"\x1f\x8b"


class ChecksumError(RuntimeError):
    """A file's md5/sha256 differs from the published or first-recorded one."""


def file_digests(path: str | os.PathLike[str], names=("md5", "sha256")) -> dict[str, str]:
    """Hex digests of one file, read once in 1 MiB chunks."""
    digests = {name: hashlib.new(name) for name in names}
    with open(path, "rb") as handle:
        while chunk := handle.read(CHUNK):
            for digest in digests.values():
                digest.update(chunk)
    return {name: d.hexdigest() for name, d in digests.items()}


def is_gzip(path: str | os.PathLike[str]) -> bool:
    """Whether the file starts with the gzip magic bytes (its name is not trusted)."""
    with open(path, "rb") as handle:
        return handle.read(2) == GZIP_MAGIC


def content_md5(path: str | os.PathLike[str]) -> tuple[str | None, str]:
    """md5 of a file's decompressed content, and how it was read.

    A gzip file (by its magic bytes, whatever its name) is decompressed in chunks, so any
    re-compression of the same content gives the same digest; any other file is taken as
    already decompressed. An unreadable gzip stream gives ``None`` and the reason."""
    if not is_gzip(path):
        return file_digests(path, ("md5",))["md5"], "file read as already decompressed"
    digest = hashlib.md5()
    try:
        with gzip.open(path, "rb") as handle:
            while chunk := handle.read(CHUNK):
                digest.update(chunk)
    except (OSError, EOFError, zlib.error) as err:
        return None, "unreadable gzip: " + " ".join(str(err).split())
    return digest.hexdigest(), "gzip decompressed"

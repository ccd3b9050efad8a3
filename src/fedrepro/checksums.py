"""File checksums for every layer: raw datasets and weight files are verified the same way."""

from __future__ import annotations

import hashlib
import os

CHUNK = 1 << 20


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

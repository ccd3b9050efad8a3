"""Atomic file writes for every layer: a killed job never leaves a file that looks finished."""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any


def atomic_write(path: str | Path, write: Callable[[str], Any]) -> None:
    """Call `write(tmp_path)`, then rename over `path` (same directory, so atomic), the file
    synced and readable as the umask allows."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    umask = os.umask(0)
    os.umask(umask)
    try:
        write(tmp)
        # after the write: a writer may recreate the file (safetensors writes it 0600), and
        # mkstemp's 0600 would hide results from others sharing a results folder
        os.chmod(tmp, 0o666 & ~umask)
        with open(tmp, "rb") as f:  # on disk before it takes the final name
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def save_tensors(path: str | Path, tensors: dict, metadata: dict[str, str] | None = None) -> None:
    """A safetensors file written atomically and byte for byte the same for the same tensors
    and metadata: safetensors writes ``__metadata__`` in its hash map's order, which changes
    from process to process, so the header is rewritten in place with sorted keys (the same
    JSON, so the same length; the tensors' offsets do not move)."""
    from safetensors.torch import save_file  # jobs that write no tensors never import torch

    def write(tmp: str) -> None:
        save_file(tensors, tmp, metadata=metadata)
        with open(tmp, "r+b") as f:
            size = int.from_bytes(f.read(8), "little")
            header = json.loads(f.read(size))
            text = json.dumps(header, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
            canonical = text.encode()
            if len(canonical) > size:  # never: the same tokens, compact, as safetensors writes
                raise ValueError(f"{path}: safetensors header of {size} bytes grew on sorting")
            f.seek(8)
            f.write(canonical.ljust(size))

    atomic_write(path, write)


def write_json(path: str | Path, obj: Any) -> None:
    atomic_write(path, lambda p: Path(p).write_text(json.dumps(obj, indent=1, sort_keys=True)))

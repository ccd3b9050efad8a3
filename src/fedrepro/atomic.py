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


def write_json(path: str | Path, obj: Any) -> None:
    atomic_write(path, lambda p: Path(p).write_text(json.dumps(obj, indent=1, sort_keys=True)))

"""Atomic checkpoints and result files: a killed job never leaves anything that looks finished."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

import torch


def atomic_write(path: Path, write) -> None:
    """Call `write(tmp_path)`, then rename over `path` (same directory, so atomic)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    try:
        write(tmp)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def write_json(path: Path, obj) -> None:
    atomic_write(path, lambda p: Path(p).write_text(json.dumps(obj, indent=1, sort_keys=True)))


def save_checkpoint(path: Path, state: dict) -> None:
    atomic_write(path, lambda p: torch.save(state, p))


def load_checkpoint(path: Path) -> dict | None:
    """The saved state, or None; only plain tensors and containers are accepted."""
    path = Path(path)
    if not path.exists():
        return None
    return torch.load(path, map_location="cpu", weights_only=True)

"""Atomic checkpoints and result files: a killed job never leaves anything that looks finished."""

from __future__ import annotations

from pathlib import Path

import torch

from fedrepro.atomic import atomic_write


def save_checkpoint(path: Path, state: dict) -> None:
    atomic_write(path, lambda p: torch.save(state, p))


def load_checkpoint(path: Path) -> dict | None:
    """The saved state, or None; only plain tensors and containers are accepted."""
    path = Path(path)
    if not path.exists():
        return None
    return torch.load(path, map_location="cpu", weights_only=True)

"""Atomic writers for report outputs: a killed job must leave nothing that looks finished."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterable
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

from matplotlib.figure import Figure  # noqa: E402


def _tmp_beside(path: Path) -> Path:
    """A fresh temporary file in the target's directory (so os.replace is atomic)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    return Path(tmp)


def write_text(path: str | Path, text: str) -> Path:
    """Write ``text`` to ``path`` atomically (temp file + rename)."""
    path = Path(path)
    tmp = _tmp_beside(path)
    try:
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return path


def save_figure(
    fig: Figure, out_prefix: str | Path, formats: Iterable[str] = ("png", "pdf")
) -> list[Path]:
    """Save ``fig`` as ``<out_prefix>.<fmt>`` for each format, each atomically."""
    written = []
    for fmt in formats:
        path = Path(f"{out_prefix}.{fmt}")
        tmp = _tmp_beside(path)
        try:
            fig.savefig(tmp, format=fmt, dpi=150, bbox_inches="tight")
            os.replace(tmp, path)
        finally:
            tmp.unlink(missing_ok=True)
        written.append(path)
    return written

"""Report outputs written through the project's atomic writer (a killed job leaves nothing
that looks finished)."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

from matplotlib.figure import Figure  # noqa: E402

from fedrepro.atomic import atomic_write  # noqa: E402


def write_text(path: str | Path, text: str) -> Path:
    """Write ``text`` (UTF-8) to ``path`` atomically."""
    atomic_write(path, lambda tmp: Path(tmp).write_text(text, encoding="utf-8"))
    return Path(path)


def save_figure(
    fig: Figure, out_prefix: str | Path, formats: Iterable[str] = ("png", "pdf")
) -> list[Path]:
    """Save ``fig`` as ``<out_prefix>.<fmt>`` for each format, each atomically. PDFs carry no
    creation date, so the same numbers give the same bytes."""
    written = []
    for fmt in formats:
        path = Path(f"{out_prefix}.{fmt}")
        meta = {"CreationDate": None} if fmt == "pdf" else None
        atomic_write(
            path,
            lambda tmp, fmt=fmt, meta=meta: fig.savefig(tmp, format=fmt, dpi=150, metadata=meta),
        )
        written.append(path)
    return written

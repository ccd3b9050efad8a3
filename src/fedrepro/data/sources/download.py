"""Checksum-verified downloads that prefer files pre-staged under ``data_root/<dataset>/``.

Login nodes have network and compute nodes often do not, so a staged file with the right
checksum is always used as is; a bad download is deleted, a user's staged file never is.
"""

from __future__ import annotations

import os
import sys
import urllib.error
import urllib.request
from pathlib import Path
from typing import BinaryIO

from fedrepro.checksums import CHUNK as _CHUNK
from fedrepro.checksums import ChecksumError, content_md5, file_digests
from fedrepro.data.sources.layouts import alternative
from fedrepro.data.sources.registry import RemoteFile, get_dataset
from fedrepro.logs import Progress, job_log

__all__ = ["ChecksumError", "download", "fetch_file", "verify"]


class DownloadError(RuntimeError):
    """A raw file could not be fetched; the message says where to stage it instead."""


def urlopen(url: str) -> BinaryIO:
    """Open a URL for streaming; module-level so tests can replace it (no network in tests)."""
    return urllib.request.urlopen(url, timeout=60)


def verify(path: str | os.PathLike[str], remote: RemoteFile) -> str:
    """Hash ``path`` in chunks and compare with every checksum ``remote`` publishes.

    Returns what the file matched: ``"published checksum"``, ``"decompressed content"`` or
    ``"no published checksum"``. Where ``remote.content_md5`` is recorded, a file whose own
    checksums differ is still accepted when its decompressed content matches (a mirror's
    re-compressed gzip, or the file staged already decompressed), and a line says so. Files
    without a published checksum pass, and their sha256 is printed so it can be recorded in
    the registry."""
    digests = file_digests(path)
    expected = {"md5": remote.md5, "sha256": remote.sha256}
    if not any(expected.values()) and not remote.content_md5:
        sha = digests["sha256"]
        print(f"{path}: no published checksum; sha256 {sha}", file=sys.stderr)
        return "no published checksum"
    mismatches = [
        f"{algo} expected {want}, got {digests[algo]}"
        for algo, want in expected.items()
        if want and digests[algo] != want.lower()
    ]
    if not mismatches and any(expected.values()):
        return "published checksum"
    if not remote.content_md5:
        raise ChecksumError(f"{path}: {mismatches[0]}")
    got, how = content_md5(path)
    if got == remote.content_md5.lower():
        kind = (
            "a re-compressed copy" if how == "gzip decompressed" else "an already decompressed file"
        )
        print(
            f"{path}: matched by its decompressed content (md5 {got}), {kind}; accepted",
            file=sys.stderr,
        )
        return "decompressed content"
    mismatches.append(f"decompressed content md5 expected {remote.content_md5}, got {got} ({how})")
    raise ChecksumError(
        f"{path}: {'; '.join(mismatches)}; stage the official {remote.filename} (any gzip of "
        f"that content will do) or its decompressed {remote.content_filename}"
    )


def _stream(url: str, part: Path, size: int | None = None) -> None:
    """Copy ``url`` to ``part``; the job's log shows the bytes done of the total (the server's
    Content-Length, else the registry's size) at each tenth and at least every 30 s."""
    with urlopen(url) as response, open(part, "wb") as out:
        total = int(getattr(response, "headers", {}).get("Content-Length") or size or 0)
        progress = Progress(part.name, total, "bytes")
        while chunk := response.read(_CHUNK):
            out.write(chunk)
            progress.add(len(chunk))
        progress.finish()


def _missing_message(remote: RemoteFile, staged: Path) -> str:
    return (
        f"{remote.dataset}: {remote.filename} cannot be downloaded automatically; "
        f"stage it at {staged}. {remote.note}"
    ).strip()


def fetch_file(
    remote: RemoteFile, dest_dir: str | os.PathLike[str], data_root: str | os.PathLike[str]
) -> Path:
    """Return a verified local copy of ``remote``.

    Order: a staged file ``data_root/<dataset>/<filename>`` with a matching checksum (no
    network), then an earlier verified download in ``dest_dir``, then a fresh download
    streamed to ``<filename>.part`` and renamed only after it verifies. A staged-only file
    may instead be staged as its extracted folder (``remote.extracted``), and a gzip file
    with a recorded ``content_md5`` decompressed (``remote.content_filename``)."""
    staged = Path(data_root) / remote.dataset / remote.filename
    dest = Path(dest_dir) / remote.filename
    names = (remote.filename, remote.content_filename) if remote.content_filename else ()
    found = next((p for p in (staged.with_name(n) for n in names) if p.exists()), staged)
    if found.exists():
        try:
            verify(found, remote)
            return found
        except ChecksumError:
            if found.parent.resolve() == dest.parent.resolve() or remote.url is None:
                raise  # never overwrite or delete the user's staged file
    if dest.exists() and dest.resolve() != staged.resolve():
        try:
            verify(dest, remote)
            return dest
        except ChecksumError as err:
            print(f"{err}; downloading again", file=sys.stderr)
            dest.unlink()
    if remote.url is None:
        unpacked = Path(data_root) / remote.dataset / (remote.extracted or remote.filename)
        if remote.extracted and unpacked.is_dir():
            return unpacked  # the archive was staged already extracted
        raise FileNotFoundError(_missing_message(remote, staged))
    dest.parent.mkdir(parents=True, exist_ok=True)
    part = dest.with_name(dest.name + ".part")
    try:
        _stream(remote.url, part, remote.size)
        verify(part, remote)
    except (urllib.error.URLError, TimeoutError) as err:
        part.unlink(missing_ok=True)
        reason = getattr(err, "reason", err)
        raise DownloadError(
            f"{remote.dataset}: cannot download {remote.url} ({reason}); check the network, "
            f"or stage the file at {staged}"
        ) from None
    except BaseException:
        part.unlink(missing_ok=True)
        raise
    os.replace(part, dest)
    return dest


def fetch_release(url: str, folder: str | os.PathLike[str]) -> Path:
    """A file published at ``url`` without a checksum (a backbone release, MoCo-v3's), kept in
    ``folder`` as ``fetch_file`` keeps a dataset's file: used where already there, else
    streamed to ``.part`` and renamed when complete (its sha256 printed for the record)."""
    folder = Path(folder)
    remote = RemoteFile(folder.name, url.rsplit("/", 1)[-1], url)
    return fetch_file(remote, folder, folder.parent)


def download(dataset: str, data_root: str | os.PathLike[str]) -> list[Path]:
    """Fetch every raw file of ``dataset`` into ``data_root/<dataset>/``, or take the layout
    staged there in its place that the parser reads (``fedrepro.data.sources.layouts``, checked by
    content) where the file itself is not staged. Files that can be neither fetched nor
    found are named all at once, in one line."""
    spec = get_dataset(dataset)
    dest_dir = Path(data_root) / spec.name
    paths, failed = [], []
    for remote in spec.remote:
        names = (remote.filename, remote.content_filename)
        if not any((dest_dir / n).exists() for n in names if n):
            stand_in = alternative(spec, remote, dest_dir)
            if stand_in is not None:
                job_log(f"{dataset}: {remote.filename} not staged; {stand_in} read in its place")
                paths.append(stand_in)
                continue
        try:
            paths.append(fetch_file(remote, dest_dir, data_root))
        except (FileNotFoundError, DownloadError) as err:
            failed.append(err)
    if failed:  # a DownloadError where a file failed to download, else none was staged
        download_failed = any(isinstance(e, DownloadError) for e in failed)
        kind = DownloadError if download_failed else FileNotFoundError
        missing = " | ".join(map(str, failed))
        raise kind(f"{len(failed)} of {len(spec.remote)} files missing: {missing}")
    return paths

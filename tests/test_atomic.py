"""Atomic writes: what a killed job leaves, and who can read what it finished."""

from __future__ import annotations

import os
import stat

import pytest
import torch

from fedrepro.atomic import atomic_write
from fedrepro.data.prepared import Split, save_split


@pytest.fixture
def umask_022():
    old = os.umask(0o022)
    yield
    os.umask(old)


def _mode(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def test_a_prepared_split_is_readable_by_others_sharing_the_results_folder(tmp_path, umask_022):
    """safetensors writes its file 0600 (it recreates the temporary file), so prepared data
    were unreadable to a shared group: the mode follows the umask after the write."""
    images = torch.zeros(2, 4, 4, 3, dtype=torch.uint8)
    split = Split(images, torch.tensor([0, 1]), None, ["a", "b"], [])
    save_split(tmp_path / "train.safetensors", split, {"dataset": "t", "split": "train"})
    assert _mode(tmp_path / "train.safetensors") == 0o644


def test_a_writer_that_recreates_its_file_still_gets_the_umask_mode(tmp_path, umask_022):
    def recreate(tmp: str) -> None:
        os.unlink(tmp)
        fd = os.open(tmp, os.O_CREAT | os.O_WRONLY, 0o600)
        os.write(fd, b"done")
        os.close(fd)

    atomic_write(tmp_path / "out.txt", recreate)
    assert (tmp_path / "out.txt").read_bytes() == b"done"
    assert _mode(tmp_path / "out.txt") == 0o644


def test_a_failed_write_leaves_neither_the_file_nor_its_temporary(tmp_path):
    def fail(tmp: str) -> None:
        with open(tmp, "w") as f:
            f.write("half")
        raise RuntimeError("killed")

    with pytest.raises(RuntimeError):
        atomic_write(tmp_path / "out.txt", fail)
    assert list(tmp_path.iterdir()) == []


SAVE_IN_A_PROCESS = """
import sys, torch
from fedrepro.data.prepared import Split, save_split
split = Split(torch.arange(48, dtype=torch.uint8).reshape(2, 4, 2, 3), torch.tensor([0, 1]),
              None, ["a", "b"], [], absent=["x.jpg"])
meta = {k: str(i) for i, k in enumerate(["dataset", "split", "scale", "seed"])}
save_split(sys.argv[1], split, meta)
"""


def test_a_prepared_split_is_the_same_bytes_from_every_process(tmp_path):
    """safetensors writes its metadata in a hash map's order, seeded per process: the same
    split gave different files (7 keys: 5,040 orders). The header is sorted after the write."""
    import subprocess
    import sys

    from fedrepro.data.prepared import load_split

    paths = [tmp_path / f"{i}.safetensors" for i in range(4)]
    for path in paths:
        subprocess.run([sys.executable, "-c", SAVE_IN_A_PROCESS, str(path)], check=True)
    assert len({p.read_bytes() for p in paths}) == 1
    loaded = load_split(paths[0])
    assert loaded.classes == ["a", "b"] and loaded.absent == ["x.jpg"]
    assert torch.equal(loaded.images.flatten(), torch.arange(48, dtype=torch.uint8))

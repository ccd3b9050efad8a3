"""MNIST as users have it: a mirror's re-compressed .gz or the decompressed IDX file is
accepted when its decompressed content matches the recorded md5; other content is refused.

Small fake IDX files stand in for MNIST (their checksums are computed here); never the network.
"""

import gzip
import hashlib
import struct
from pathlib import Path

import numpy as np
import pytest

from fedrepro.data.sources import download as dl
from fedrepro.data.sources.parsers import parse
from fedrepro.data.sources.registry import DatasetSpec, RemoteFile, get_dataset
from tests.workflow_helpers import script_exit

RNG = np.random.default_rng(12)
NAMES = {  # registry file name -> (prefix, kind)
    "train-images-idx3-ubyte.gz": ("train", "images"),
    "train-labels-idx1-ubyte.gz": ("train", "labels"),
    "t10k-images-idx3-ubyte.gz": ("t10k", "images"),
    "t10k-labels-idx1-ubyte.gz": ("t10k", "labels"),
}


def _md5(data: bytes) -> str:
    return hashlib.md5(data).hexdigest()


def _idx(array: np.ndarray) -> bytes:
    header = b"\x00\x00\x08" + bytes([array.ndim]) + struct.pack(f">{array.ndim}i", *array.shape)
    return header + array.tobytes()


def _official(content: bytes) -> bytes:
    return gzip.compress(content, compresslevel=9, mtime=0)


def _mirror(content: bytes) -> bytes:
    """What a mirror that re-compressed the file serves: same content, other gzip bytes."""
    return gzip.compress(content, compresslevel=1, mtime=1_700_000_000)


def _fake_mnist():
    """Decompressed IDX content per registry name, plus the arrays it holds."""
    arrays = {}
    for prefix, n in (("train", 5), ("t10k", 3)):
        arrays[prefix, "images"] = RNG.integers(0, 256, (n, 28, 28), dtype=np.uint8)
        arrays[prefix, "labels"] = RNG.integers(0, 10, n).astype(np.uint8)
    contents = {name: _idx(arrays[key]) for name, key in NAMES.items()}
    return contents, arrays


def _remote(name: str, content: bytes) -> RemoteFile:
    """A RemoteFile shaped like the registry's mnist entries, with this content's checksums."""
    url = f"https://mirror.invalid/mnist/{name}"
    return RemoteFile("mnist", name, url, md5=_md5(_official(content)), content_md5=_md5(content))


def _no_network(url):
    raise AssertionError(f"opener called for {url}")


@pytest.fixture
def offline(monkeypatch):
    monkeypatch.setattr(dl, "urlopen", _no_network)


def _stage(root: Path, name: str, data: bytes) -> Path:
    path = root / "mnist" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


def test_mnist_registry_records_compressed_and_decompressed_md5():
    files = {r.filename: r for r in get_dataset("mnist").remote}
    assert {n: (r.md5, r.content_md5) for n, r in files.items()} == {
        "train-images-idx3-ubyte.gz": (
            "f68b3c2dcbeaaa9fbdd348bbdeb94873",
            "6bbc9ace898e44ae57da46a324031adb",
        ),
        "train-labels-idx1-ubyte.gz": (
            "d53e105ee54ea40749a09fcbcd1e9432",
            "a25bea736e30d166cdddb491f175f624",
        ),
        "t10k-images-idx3-ubyte.gz": (
            "9fb629c4189551a2d022fa330f9573f3",
            "2646ac647ad5339dbf082846283269ea",
        ),
        "t10k-labels-idx1-ubyte.gz": (
            "ec29112dd5afa0611ce80d1b7f02629c",
            "27ae3e4e09519cfbb04c329615203637",
        ),
    }
    assert files["train-images-idx3-ubyte.gz"].content_filename == "train-images-idx3-ubyte"
    fmnist = get_dataset("fmnist").remote  # labels only (tests/data/test_staged_layouts.py)
    assert [r.content_md5 is None for r in fmnist] == [True, False, True, False]
    assert fmnist[0].content_filename is None


def test_official_gzip_still_matches_its_published_md5_silently(tmp_path, offline, capsys):
    content = _fake_mnist()[0]["train-labels-idx1-ubyte.gz"]
    remote = _remote("train-labels-idx1-ubyte.gz", content)
    staged = _stage(tmp_path, remote.filename, _official(content))
    assert dl.verify(staged, remote) == "published checksum"
    assert dl.fetch_file(remote, staged.parent, tmp_path) == staged
    assert capsys.readouterr().err == ""


def test_recompressed_gzip_is_accepted_by_its_decompressed_content(tmp_path, offline, capsys):
    content = _fake_mnist()[0]["train-images-idx3-ubyte.gz"]
    remote = _remote("train-images-idx3-ubyte.gz", content)
    mirrored = _mirror(content)
    assert _md5(mirrored) != remote.md5  # the case refused before: other compressed bytes
    staged = _stage(tmp_path, remote.filename, mirrored)
    assert dl.verify(staged, remote) == "decompressed content"
    assert dl.fetch_file(remote, staged.parent, tmp_path) == staged
    err = capsys.readouterr().err
    line = (
        f"{staged}: matched by its decompressed content (md5 {remote.content_md5}), "
        "a re-compressed copy; accepted\n"
    )
    assert err == line * 2
    assert staged.read_bytes() == mirrored  # used as is, never rewritten


@pytest.mark.parametrize("staged_as", ["decompressed name", "original .gz name"])
def test_already_decompressed_file_is_accepted_and_parsed(tmp_path, offline, capsys, staged_as):
    contents, arrays = _fake_mnist()
    remotes = tuple(_remote(name, content) for name, content in contents.items())
    staged = []
    for remote in remotes:
        name = remote.content_filename if staged_as == "decompressed name" else remote.filename
        staged.append(_stage(tmp_path, name, contents[remote.filename]))
    spec = DatasetSpec("mnist", get_dataset("mnist").classes, 1, 28, ("train", "test"),
                       remote=remotes, parser="idx")  # fmt: skip
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(dl, "get_dataset", lambda name: spec)
        assert dl.download("mnist", tmp_path) == staged
    err = capsys.readouterr().err
    assert err.count("matched by its decompressed content") == 4
    assert err.count("an already decompressed file; accepted") == 4
    out = parse("mnist", tmp_path / "mnist")
    assert np.array_equal(out["train"].images[..., 0].numpy(), arrays["train", "images"])
    assert out["train"].labels.tolist() == arrays["train", "labels"].tolist()
    assert np.array_equal(out["test"].images[..., 0].numpy(), arrays["t10k", "images"])
    assert out["test"].labels.tolist() == arrays["t10k", "labels"].tolist()


def test_recompressed_files_download_and_parse_like_the_official_ones(tmp_path, offline):
    contents, arrays = _fake_mnist()
    remotes = tuple(_remote(name, content) for name, content in contents.items())
    for name, content in contents.items():
        _stage(tmp_path, name, _mirror(content))
    spec = DatasetSpec("mnist", get_dataset("mnist").classes, 1, 28, ("train", "test"),
                       remote=remotes, parser="idx")  # fmt: skip
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(dl, "get_dataset", lambda name: spec)
        assert [p.name for p in dl.download("mnist", tmp_path)] == list(contents)
    out = parse("mnist", tmp_path / "mnist")
    assert np.array_equal(out["test"].images[..., 0].numpy(), arrays["t10k", "images"])


@pytest.mark.parametrize("staged_as", ["gz", "decompressed"])
def test_different_content_is_refused_naming_file_and_both_checksums(tmp_path, offline, staged_as):
    content = _fake_mnist()[0]["train-images-idx3-ubyte.gz"]
    remote = _remote("train-images-idx3-ubyte.gz", content)
    other = content[:-1] + bytes([content[-1] ^ 0xFF])  # one pixel differs
    if staged_as == "gz":
        staged = _stage(tmp_path, remote.filename, _mirror(other))
        how = "gzip decompressed"
    else:
        staged = _stage(tmp_path, remote.content_filename, other)
        how = "file read as already decompressed"
    with pytest.raises(dl.ChecksumError) as err:
        dl.fetch_file(remote, staged.parent, tmp_path)
    got = _md5(staged.read_bytes())
    assert str(err.value) == (
        f"{staged}: md5 expected {remote.md5}, got {got}; decompressed content md5 expected "
        f"{remote.content_md5}, got {_md5(other)} ({how}); stage the official "
        "train-images-idx3-ubyte.gz (any gzip of that content will do) or its decompressed "
        "train-images-idx3-ubyte"
    )
    assert staged.exists()  # the user's file is kept, and nothing was downloaded


def test_unreadable_gzip_is_refused_saying_so(tmp_path, offline):
    content = _fake_mnist()[0]["t10k-labels-idx1-ubyte.gz"]
    remote = _remote("t10k-labels-idx1-ubyte.gz", content)
    staged = _stage(tmp_path, remote.filename, _mirror(content)[:-12])  # truncated download
    with pytest.raises(dl.ChecksumError) as err:
        dl.fetch_file(remote, staged.parent, tmp_path)
    text = str(err.value)
    assert "\n" not in text and text.startswith(f"{staged}: md5 expected {remote.md5}")
    want = f"decompressed content md5 expected {remote.content_md5}, got None (unreadable gzip:"
    assert want in text


def test_refusal_is_one_line_from_the_download_script(tmp_path, monkeypatch):
    content = _fake_mnist()[0]["train-labels-idx1-ubyte.gz"]
    remote = _remote("train-labels-idx1-ubyte.gz", content)
    staged = _stage(tmp_path, remote.filename, _mirror(content + b"\x07"))
    spec = DatasetSpec("mnist", get_dataset("mnist").classes, 1, 28, ("train", "test"),
                       remote=(remote,), parser="idx")  # fmt: skip
    monkeypatch.setattr(dl, "urlopen", _no_network)
    monkeypatch.setattr(dl, "get_dataset", lambda name: spec)
    text = script_exit(
        monkeypatch, "download_data.py", "--dataset", "mnist", "--data-root", str(tmp_path),
        "--out-flag", str(tmp_path / "flag"),
    )  # fmt: skip
    assert "\n" not in text
    assert text.startswith(f"fedrepro download error (ChecksumError): {staged}: md5 expected ")
    assert remote.md5 in text and remote.content_md5 in text
    assert not (tmp_path / "flag").exists()


@pytest.mark.parametrize(
    ("data", "says"),
    [
        (b"\x1f\x8b\x08\x00garbage", "unreadable gzip"),
        (b"PK\x03\x04 not idx", "not an unsigned-byte IDX file (starts 504b0304)"),
        (_idx(np.zeros((4, 28, 28), np.uint8))[:-5], "but 3131 bytes follow"),
    ],
    ids=["broken-gzip", "not-idx", "truncated-idx"],
)
def test_parser_errors_name_the_file_and_say_what_to_stage(tmp_path, data, says):
    contents = _fake_mnist()[0]
    for name, content in contents.items():
        (tmp_path / name).write_bytes(_official(content))
    bad = tmp_path / "train-images-idx3-ubyte.gz"
    bad.write_bytes(data)
    with pytest.raises(ValueError) as err:
        parse("mnist", tmp_path)
    text = str(err.value)
    assert "\n" not in text and text.startswith(f"{bad}: ") and says in text
    assert text.endswith(
        "stage the official train-images-idx3-ubyte.gz (any gzip of the same content) "
        "or the decompressed train-images-idx3-ubyte"
    )

"""Checksum-verified fetching: local files, file:// URLs and a server on loopback, never the
network."""

import hashlib
import http.server
import re
import threading
import time
import urllib.error
from functools import partial

import pytest

from fedrepro import logs
from fedrepro.data.sources import download as dl
from fedrepro.data.sources.registry import DatasetSpec, RemoteFile
from tests.workflow_helpers import script_exit

PAYLOAD = b"fedrepro test payload\n" * 1000


def _remote(tmp_path, *, good=True, url=True, **hashes):
    source = tmp_path / "server" / "blob.bin"
    source.parent.mkdir(parents=True, exist_ok=True)
    source.write_bytes(PAYLOAD)
    if not hashes:
        digest = hashlib.sha256(PAYLOAD if good else b"other").hexdigest()
        hashes = {"sha256": digest}
    return RemoteFile("toy", "blob.bin", source.as_uri() if url else None, **hashes)


def _no_network(url):
    raise AssertionError(f"opener called for {url}")


def test_verify_accepts_matching_md5_and_sha256(tmp_path):
    path = tmp_path / "f"
    path.write_bytes(PAYLOAD)
    md5, sha256 = hashlib.md5(PAYLOAD).hexdigest(), hashlib.sha256(PAYLOAD).hexdigest()
    remote = RemoteFile("toy", "f", None, md5=md5, sha256=sha256)
    dl.verify(path, remote)


def test_verify_mismatch_names_the_file_and_algorithm(tmp_path):
    path = tmp_path / "f"
    path.write_bytes(PAYLOAD)
    remote = RemoteFile("toy", "f", None, md5=hashlib.md5(b"x").hexdigest())
    with pytest.raises(
        dl.ChecksumError, match=rf"{path}: md5 expected .*, got {hashlib.md5(PAYLOAD).hexdigest()}"
    ):
        dl.verify(path, remote)


def test_download_from_file_url_is_verified_and_renamed(tmp_path, monkeypatch):
    lines = []
    monkeypatch.setattr(logs, "job_log", lines.append)
    remote = _remote(tmp_path)
    dest = tmp_path / "root" / "toy"
    path = dl.fetch_file(remote, dest, tmp_path / "root")
    assert path == dest / "blob.bin" and path.read_bytes() == PAYLOAD
    assert not (dest / "blob.bin.part").exists()
    assert re.fullmatch(  # through logging
        r"blob\.bin\.part: 22,000 of 22,000 bytes \(100 %\), [\d.,]+ [kMG]?B/s, eta 0s",
        lines[-1],
    )


def test_bad_download_raises_naming_file_and_leaves_nothing(tmp_path):
    remote = _remote(tmp_path, good=False)
    dest = tmp_path / "root" / "toy"
    with pytest.raises(dl.ChecksumError, match=r"blob\.bin\.part: sha256 expected"):
        dl.fetch_file(remote, dest, tmp_path / "root")
    assert list(dest.iterdir()) == []


def test_staged_file_with_right_checksum_is_used_without_network(tmp_path, monkeypatch):
    monkeypatch.setattr(dl, "urlopen", _no_network)
    remote = _remote(tmp_path)
    staged = tmp_path / "root" / "toy" / "blob.bin"
    staged.parent.mkdir(parents=True)
    staged.write_bytes(PAYLOAD)
    assert dl.fetch_file(remote, tmp_path / "elsewhere", tmp_path / "root") == staged


def test_staged_file_with_wrong_checksum_is_reported_and_kept(tmp_path, monkeypatch):
    monkeypatch.setattr(dl, "urlopen", _no_network)
    remote = _remote(tmp_path)
    staged = tmp_path / "root" / "toy" / "blob.bin"
    staged.parent.mkdir(parents=True)
    staged.write_bytes(b"corrupted")
    with pytest.raises(dl.ChecksumError, match=str(staged)):
        dl.fetch_file(remote, staged.parent, tmp_path / "root")
    assert staged.read_bytes() == b"corrupted"


def test_earlier_bad_download_elsewhere_is_replaced(tmp_path):
    remote = _remote(tmp_path)
    dest = tmp_path / "cache"
    dest.mkdir()
    (dest / "blob.bin").write_bytes(b"truncated")
    assert dl.fetch_file(remote, dest, tmp_path / "root").read_bytes() == PAYLOAD


def test_staged_only_file_missing_says_where_to_put_it(tmp_path):
    remote = RemoteFile("toy", "split.zip", None, note="Get it from Google Drive id XYZ.")
    with pytest.raises(FileNotFoundError) as err:
        dl.fetch_file(remote, tmp_path / "root" / "toy", tmp_path / "root")
    message = str(err.value)
    assert str(tmp_path / "root" / "toy" / "split.zip") in message and "XYZ" in message


def test_staged_only_archive_may_be_staged_extracted(tmp_path):
    remote = RemoteFile("toy", "split.zip", None, note="Google Drive", extracted="tree")
    (tmp_path / "root" / "toy" / "tree").mkdir(parents=True)
    path = dl.fetch_file(remote, tmp_path / "root" / "toy", tmp_path / "root")
    assert path == tmp_path / "root" / "toy" / "tree"


def test_file_without_checksum_passes_and_prints_its_sha256(tmp_path, capsys):
    remote = RemoteFile("toy", "f", None)
    path = tmp_path / "root" / "toy" / "f"
    path.parent.mkdir(parents=True)
    path.write_bytes(PAYLOAD)
    assert dl.fetch_file(remote, path.parent, tmp_path / "root") == path
    assert hashlib.sha256(PAYLOAD).hexdigest() in capsys.readouterr().err


def test_download_fetches_every_file_of_a_dataset(tmp_path, monkeypatch):
    url = (tmp_path / "server" / "blob.bin").as_uri()
    second = RemoteFile("toy", "b.bin", url, md5=hashlib.md5(PAYLOAD).hexdigest())
    files = (_remote(tmp_path), second)
    spec = DatasetSpec("toy", ("a",), 1, 8, ("train",), remote=files, parser="idx")
    monkeypatch.setattr(dl, "get_dataset", lambda name: spec)
    paths = dl.download("toy", tmp_path / "root")
    assert [p.name for p in paths] == ["blob.bin", "b.bin"]
    assert all(p.parent == tmp_path / "root" / "toy" for p in paths)


def test_offline_download_is_one_line_saying_where_to_stage(tmp_path, monkeypatch):
    def offline(url):
        raise urllib.error.URLError("[Errno -3] Temporary failure in name resolution")

    monkeypatch.setattr(dl, "urlopen", offline)
    dest = tmp_path / "root" / "toy"
    with pytest.raises(dl.DownloadError) as err:
        dl.fetch_file(_remote(tmp_path), dest, tmp_path / "root")
    text = str(err.value)
    assert "\n" not in text and "check the network" in text
    assert str(tmp_path / "root" / "toy" / "blob.bin") in text  # where to stage it
    assert not dest.exists() or list(dest.iterdir()) == []


def test_download_script_turns_the_error_into_one_line(tmp_path, monkeypatch):
    def fail(dataset, root):
        raise dl.DownloadError("toy: cannot download x (offline); check the network")

    monkeypatch.setattr(dl, "download", fail)
    message = script_exit(
        monkeypatch, "download_data.py", "--dataset", "toy", "--data-root", str(tmp_path),
        "--out-flag", str(tmp_path / "flag"),
    )  # fmt: skip
    line = "fedrepro download error (DownloadError): toy: cannot download x (offline); "
    assert message == line + "check the network"
    assert not (tmp_path / "flag").exists()


class Slow(http.server.SimpleHTTPRequestHandler):
    """A slow mirror, quietly: a pause of an eighth of a second after each quarter MiB."""

    def copyfile(self, source, outputfile) -> None:
        while chunk := source.read(1 << 18):
            outputfile.write(chunk)
            time.sleep(0.125)

    def log_message(self, *args) -> None:
        pass


@pytest.fixture
def served(tmp_path):
    """A folder served over HTTP on 127.0.0.1 (its URL), as a dataset's mirror would be."""
    folder = tmp_path / "www"
    folder.mkdir()
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), partial(Slow, directory=folder))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield folder, f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def test_a_download_over_http_logs_its_rate_and_time_left(tmp_path, monkeypatch, served):
    """Downloads logged the bytes done and nothing of their pace: each line now gives the rate
    and the time left (the server's Content-Length as the total), through the download
    function the workflow's data rule calls, from a slow server on loopback."""
    monkeypatch.setenv("no_proxy", "*")  # loopback, whatever proxy the machine sets
    lines = []
    monkeypatch.setattr(logs, "job_log", lines.append)
    folder, url = served
    payload = bytes(range(256)) * (4 * 4096)  # 4 MiB: four of the download's 1 MiB chunks
    (folder / "blob.bin").write_bytes(payload)
    remote = RemoteFile("toy", "blob.bin", f"{url}/blob.bin",
                        sha256=hashlib.sha256(payload).hexdigest())  # fmt: skip
    spec = DatasetSpec("toy", ("a",), 1, 8, ("train",), remote=(remote,), parser="idx")
    monkeypatch.setattr(dl, "get_dataset", lambda name: spec)
    [path] = dl.download("toy", tmp_path / "root")
    assert path.read_bytes() == payload
    line = re.compile(
        r"blob\.bin\.part: ([\d,]+) of 4,194,304 bytes \((\d+) %\), ([\d.]+) ([kM]?)B/s, "
        r"eta (\d+)s"
    )
    found = [line.fullmatch(x) for x in lines]
    assert len(lines) >= 4 and all(found), lines
    assert [int(m[2]) for m in found] == sorted(int(m[2]) for m in found)
    first, last = found[0], found[-1]
    # the first MiB took at least three of the server's pauses (0.375 s), 3 MiB are left
    assert int(first[2]) < 100 and int(first[5]) >= 1 and float(first[3]) > 0, lines
    assert last[2] == "100" and last[5] == "0", lines

"""Real data as a user stages it (issue 33), on tiny trees shaped as the real ones: every layout
a parser reads passes the download step, absent listed files are counted, named and bounded,
prepared data are checked against the registry, macOS resource files are skipped, and
missing files are named all at once in one line."""

import math
import pickle
import re
import zipfile
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import scipy.io
from PIL import Image

from fedrepro import logs
from fedrepro.data.build import prepare
from fedrepro.data.prepared import load_split
from fedrepro.data.sources import download as dl
from fedrepro.data.sources import parsers
from fedrepro.data.sources.parsers import parse
from fedrepro.data.sources.rawfiles import load_images
from fedrepro.data.sources.registry import DATASETS
from fedrepro.experiments.config import load_yaml
from fedrepro.experiments.plan import build_plan, paper_plan
from tests.workflow_helpers import script_exit

RNG = np.random.default_rng(33)


def _image(path, side=8):
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(RNG.integers(0, 256, (side, side, 3), dtype=np.uint8)).save(path)


def _offline(url):
    raise AssertionError(f"the network was asked for {url}")


@pytest.fixture
def lines(monkeypatch):
    """The job-log lines written (progress, absent files, stand-ins)."""
    out = []
    monkeypatch.setattr(logs, "job_log", out.append)
    monkeypatch.setattr(parsers, "job_log", out.append)
    monkeypatch.setattr(dl, "job_log", out.append)
    return out


# --- Tiny-ImageNet ---------------------------------------------------------------------------


def _tiny_tree(root, wnids, per_class=2, val=3):
    """tiny-imagenet-200/{train/<wnid>/images, val/images + val_annotations.txt}, 8 px."""
    tree = root / "tiny-imagenet-200"
    for w in wnids:
        for i in range(per_class):
            _image(tree / "train" / w / "images" / f"{w}_{i}.JPEG")
    rows = []
    for i in range(val):
        _image(tree / "val" / "images" / f"val_{i}.JPEG")
        rows.append(f"val_{i}.JPEG\t{wnids[i % len(wnids)]}\t0\t0\t7\t7")
    (tree / "val" / "val_annotations.txt").write_text("\n".join(rows) + "\n")
    return tree


@pytest.fixture
def small_tiny(monkeypatch):
    """The registry's Tiny-ImageNet with 2 classes, 4 train and 3 test images, 8 px."""
    spec = replace(DATASETS["tinyimagenet"], classes=("a", "b"), sizes=(4, 3), image_size=8)
    monkeypatch.setitem(DATASETS, "tinyimagenet", spec)


def test_extracted_tinyimagenet_tree_passes_the_download_step(
    tmp_path, monkeypatch, lines, small_tiny
):
    monkeypatch.setattr(dl, "urlopen", _offline)
    tree = _tiny_tree(tmp_path / "tinyimagenet", ["n01", "n02"])
    assert dl.download("tinyimagenet", tmp_path) == [tree]
    assert lines == [f"tinyimagenet: tiny-imagenet-200.zip not staged; {tree} read in its place"]


def test_tinyimagenet_tree_with_extra_classes_is_refused_at_download_and_prepare(
    tmp_path, monkeypatch, small_tiny
):
    """Two extra class folders: 4 classes where the registry has 2 (the real case: 202/200)."""
    monkeypatch.setattr(dl, "urlopen", _offline)
    _tiny_tree(tmp_path / "tinyimagenet", ["n01", "n02", "n03", "n04"], per_class=1)
    with pytest.raises(ValueError, match=r"train/ holds 4 class folders, not 2") as err:
        dl.download("tinyimagenet", tmp_path)
    assert "\n" not in str(err.value)
    message = script_exit(  # the rule's script: one line, no flag
        monkeypatch, "download_data.py", "--dataset", "tinyimagenet", "--data-root",
        str(tmp_path), "--out-flag", str(tmp_path / "flag"),
    )  # fmt: skip
    assert message.startswith("fedrepro download error (ValueError): tinyimagenet: ")
    assert not (tmp_path / "flag").exists()
    with pytest.raises(ValueError) as err:
        prepare("tinyimagenet", "paper", tmp_path / "out", tmp_path / "tinyimagenet")
    message = str(err.value)
    assert "\n" not in message
    assert message.startswith("tinyimagenet: the prepared data differ from the registry: ")
    assert "train: 4 classes, the registry has 2" in message
    assert not (tmp_path / "out").exists()


def test_prepare_checks_split_sizes_and_image_size(tmp_path, small_tiny):
    _tiny_tree(tmp_path, ["n01", "n02"], per_class=3)  # 6 train images, published 4
    with pytest.raises(ValueError, match=r"train: 6 images, published 4$"):
        prepare("tinyimagenet", "paper", tmp_path / "out", tmp_path)
    (tmp_path / "out").mkdir()
    _tiny_tree(tmp_path / "ok", ["n01", "n02"])
    paths = prepare("tinyimagenet", "paper", tmp_path / "out", tmp_path / "ok")
    assert load_split(paths[0]).images.shape == (4, 8, 8, 3)
    assert load_split(paths[1]).labels.tolist() == [0, 1, 0]


def test_macos_resource_files_in_a_tree_are_skipped(tmp_path, small_tiny):
    """An archive made on a Mac holds ``._<name>`` beside each image: same suffix, no image."""
    tree = _tiny_tree(tmp_path, ["n01", "n02"])
    for image in list(tree.rglob("*.JPEG")):
        (image.parent / f"._{image.name}").write_bytes(b"\x00\x05\x16\x07 Mac OS X resource")
    (tree / "val" / "images" / "._val_0.JPEG").unlink()  # val reads the annotations only
    out = parse("tinyimagenet", tmp_path)
    assert out["train"].labels.tolist() == [0, 0, 1, 1] and len(out["test"].labels) == 3


# --- MNIST-M and SynthDigits -----------------------------------------------------------------


def test_mnistm_original_release_and_class_folder_tree_pass_the_download_step(
    tmp_path, monkeypatch, lines
):
    """train: the original release (mnist_m_train/ + mnist_m_train_labels.txt, 32 px PNGs);
    test: a class-folder tree mnist_m/test/<digit>/."""
    monkeypatch.setattr(dl, "urlopen", _offline)
    raw = tmp_path / "mnistm"
    rows = []
    for i, digit in enumerate((3, 0, 7)):
        _image(raw / "mnist_m" / "mnist_m_train" / f"{i:08d}.png", 32)
        rows.append(f"{i:08d}.png {digit}")
    (raw / "mnist_m" / "mnist_m_train_labels.txt").write_text("\n".join(rows) + "\n")
    for digit in range(10):
        _image(raw / "mnist_m" / "test" / str(digit) / f"{digit}.png", 32)
    got = dl.download("mnistm", tmp_path)
    assert got == [raw / "mnist_m" / "mnist_m_train", raw / "mnist_m" / "test"]
    assert len(lines) == 2 and all("read in its place" in line for line in lines)
    out = prepare("mnistm", "paper", tmp_path / "out", raw)
    train, test = (load_split(p) for p in out)
    assert train.labels.tolist() == [3, 0, 7] and train.images.shape == (3, 32, 32, 3)
    assert test.labels.tolist() == list(range(10))
    (raw / "mnist_m" / "mnist_m_train" / "00000001.png").unlink()
    with pytest.raises(ValueError, match=r"mnist_m_train is staged in place of mnist_m_train"):
        dl.download("mnistm", tmp_path)


def _synth_mat(path, n):
    x = RNG.integers(0, 256, (32, 32, 3, n), dtype=np.uint8)
    scipy.io.savemat(path, {"X": x, "y": RNG.integers(1, 11, (n, 1)).astype(np.uint8)})


def test_synthdigits_mat_files_pass_the_download_step(tmp_path, monkeypatch, lines):
    monkeypatch.setattr(dl, "urlopen", _offline)
    raw = tmp_path / "synthdigits"
    raw.mkdir()
    _synth_mat(raw / "synth_train_32x32.mat", 5)
    _synth_mat(raw / "synth_test_32x32.mat", 2)
    assert dl.download("synthdigits", tmp_path) == [
        raw / "synth_train_32x32.mat",
        raw / "synth_test_32x32.mat",
    ]
    scipy.io.savemat(raw / "synth_test_32x32.mat", {"X": np.zeros((28, 28, 5), np.uint8)})
    with pytest.raises(ValueError, match=r"synth_test_32x32.mat is staged in place of synth_test"):
        dl.download("synthdigits", tmp_path)


# --- DomainNet: FedBN's split pickles over the pinned zips -------------------------------------

DOMAINS = DATASETS["domainnet"].domains
CLASSES = DATASETS["domainnet"].classes


def _domainnet(raw, absent=(), zipped=True):
    """The six domain zips (every class, two 8 px images each) and FedBN's pickles listing
    each domain's images as ../data/DomainNet/<domain>/<class>/<file>, plus ``absent``
    (domain-relative keys listed in the pickles but in no zip)."""
    raw.mkdir(parents=True, exist_ok=True)
    tree = raw / "unzipped"
    keys = {d: [f"{d}/{c}/{d}_{c}_{i}.jpg" for c in CLASSES for i in range(2)] for d in DOMAINS}
    for domain, names in keys.items():
        for key in names:
            _image(tree / key)
        if zipped:
            with zipfile.ZipFile(raw / f"{domain}.zip", "w") as zf:
                for key in names:
                    zf.write(tree / key, key)
    if zipped:
        for path in sorted(tree.rglob("*"), reverse=True):  # only the zips stay staged
            path.unlink() if path.is_file() else path.rmdir()
        tree.rmdir()
    split_dir = raw / "DomainNet"
    split_dir.mkdir()
    for domain, names in keys.items():
        listed = names + [k for k in absent if k.startswith(domain + "/")]
        for split, chosen in (("train", listed[::2]), ("test", listed[1::2])):
            paths = np.array([f"../data/DomainNet/{k}" for k in chosen])
            labels = np.array([k.split("/")[1] for k in chosen])
            (split_dir / f"{domain}_{split}.pkl").write_bytes(pickle.dumps((paths, labels)))


def test_domainnet_absent_listed_files_are_counted_named_and_recorded(tmp_path, lines):
    """FedBN's pickles list files that the cleaned clipart/painting zips lack (11 + 22): left
    out, each named in the log, counted, and recorded in the prepared file."""
    absent = ["clipart/bird/clipart_032_000255.jpg", "painting/zebra/painting_344_000001.jpg"]
    _domainnet(tmp_path / "domainnet", absent)
    paths = prepare("domainnet", "paper", tmp_path / "out", tmp_path / "domainnet", size=8)
    train, test = (load_split(p) for p in paths)
    per_domain = len(CLASSES) * 2  # the images the zips hold, half of them in each split
    assert len(train.labels) + len(test.labels) == 6 * per_domain
    assert train.absent == absent and test.absent == []  # both listed for training
    assert f"domainnet: listed but absent, left out: {absent[0]}" in lines
    assert "domainnet: 2 listed files absent (at most 33)" in lines


def test_domainnet_absent_listed_files_above_the_threshold_are_refused(tmp_path):
    absent = [f"painting/bird/painting_999_{i:06d}.jpg" for i in range(34)]
    _domainnet(tmp_path / "domainnet", absent)
    with pytest.raises(FileNotFoundError) as err:
        prepare("domainnet", "paper", tmp_path / "out", tmp_path / "domainnet", size=8)
    message = str(err.value)
    assert "\n" not in message and "34 files listed by the split files are absent" in message
    assert "at most 33 may be: the cleaned clipart and painting zips" in message
    assert absent[0] in message and "and 14 more" in message


def test_domainnet_extracted_domain_folders_pass_the_download_step(tmp_path, monkeypatch, lines):
    monkeypatch.setattr(dl, "urlopen", _offline)
    _domainnet(tmp_path / "domainnet", zipped=False)
    got = dl.download("domainnet", tmp_path)
    assert got[:6] == [tmp_path / "domainnet" / "unzipped" / d for d in DOMAINS]
    assert got[6] == tmp_path / "domainnet" / "DomainNet"  # the pickles, staged extracted


# --- one line naming every missing file ---------------------------------------------------------


def test_download_names_every_missing_file_at_once(tmp_path, monkeypatch):
    def offline(url):
        raise dl.urllib.error.URLError("no network")

    monkeypatch.setattr(dl, "urlopen", offline)
    with pytest.raises(dl.DownloadError) as err:
        dl.download("mnist", tmp_path)
    message = str(err.value)
    assert "\n" not in message and message.startswith("4 of 4 files missing: ")
    for name in ("train-images", "train-labels", "t10k-images", "t10k-labels"):
        assert (
            str(tmp_path / "mnist" / f"{name}-idx{1 + name.endswith('images') * 2}-ubyte.gz")
            in message
        )


def test_prepare_script_is_one_line_naming_every_file_looked_for(tmp_path, monkeypatch):
    (tmp_path / "mnist").mkdir()
    (tmp_path / "mnist" / "t10k-labels-idx1-ubyte.gz").write_bytes(b"")  # one staged
    message = script_exit(
        monkeypatch, "prepare_data.py", "--dataset", "mnist", "--scale", "paper",
        "--raw-dir", str(tmp_path / "mnist"), "--out-dir", str(tmp_path / "out"),
    )  # fmt: skip
    assert "\n" not in message
    assert message.startswith("fedrepro prepare error (FileNotFoundError): ")
    assert "not staged (3): " in message
    for name in ("train-images-idx3", "train-labels-idx1", "t10k-images-idx3"):
        assert str(tmp_path / "mnist" / f"{name}-ubyte.gz") in message
    assert "t10k-labels-idx1-ubyte.gz," not in message


# --- progress ------------------------------------------------------------------------------------


def test_preparation_logs_images_decoded_each_tenth(tmp_path, lines):
    paths = [tmp_path / f"{i}.png" for i in range(25)]
    for path in paths:
        _image(path)
    load_images(paths, 8, what="toy train")
    pace = r", [\d.,]+ images/s, eta \d+(?:s|m\d\ds|h\d\dm)"
    assert len(lines) == 10 and re.fullmatch(r"toy train: 3 of 25 images \(12 %\)" + pace, lines[0])
    assert re.fullmatch(
        r"toy train: 25 of 25 images \(100 %\), [\d.,]+ images/s, eta 0s", lines[-1]
    )


# --- preparation memory --------------------------------------------------------------------------


def test_prepare_memory_is_sized_by_the_dataset():
    """Measured peaks: Tiny-ImageNet 3.1 GB, DomainNet 7.5 GB; a flat 16 GB asked too much of
    the small datasets and nothing was sized by what a job holds."""
    repo = Path(__file__).resolve().parents[2]
    plan = paper_plan(repo)
    mem = {d: plan.resources("data", d)["mem_mb"] for d in plan.datasets}
    assert mem["tinyimagenet"] == 1500 + math.ceil(3.5 * 110_000 * 64 * 64 * 3 / 2**20)
    assert mem["tinyimagenet"] > 3_100 and mem["domainnet"] > 7_500
    assert mem["cifar101"] < 1_600 and mem["cifar10"] < mem["svhn"] < mem["tinyimagenet"]
    assert plan.resources("data", "domainnet", attempt=2)["mem_mb"] == 2 * mem["domainnet"]
    mini = build_plan(load_yaml(repo / "config/config.yaml"), repo)
    assert {mini.resources("data", d)["mem_mb"] for d in mini.datasets} == {2000}


def test_fashion_mnist_labels_decompressed_content_is_recorded():
    """Hashed from the official files (zalandoresearch/fashion-mnist@b2617bb:data/fashion/):
    a mirror's re-compressed or a decompressed labels file is accepted, as for MNIST."""
    content = {r.filename: r.content_md5 for r in DATASETS["fmnist"].remote}
    assert content == {
        "train-images-idx3-ubyte.gz": None,
        "train-labels-idx1-ubyte.gz": "9018921c3c673c538a1fc5bad174d6f9",
        "t10k-images-idx3-ubyte.gz": None,
        "t10k-labels-idx1-ubyte.gz": "15d484375f8d13e6eb1aabb0c3f46965",
    }
    assert DATASETS["mnistm"].image_size == 32 and DATASETS["cifar101"].sizes == (2_000,)


def test_progress_of_an_unknown_total_goes_by_time_and_ends_with_a_line(lines, monkeypatch):
    clock = iter([0.0, 10.0, 31.0, 40.0])  # start, two adds, finish
    monkeypatch.setattr(logs.time, "monotonic", lambda: next(clock))
    progress = logs.Progress("blob.part", 0, "bytes", every=30.0)  # no Content-Length
    progress.add(1_000)  # 10 s: no line
    progress.add(2_000)  # 31 s: a line, with the rate and no time left (no total)
    progress.finish()
    assert lines == ["blob.part: 3,000 bytes, 96.8 B/s", "blob.part: 3,000 bytes, 75 B/s"]

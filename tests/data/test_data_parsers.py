"""Parsers on tiny files written here in each real on-disk format, checked exactly."""

import bz2
import gzip
import io
import os
import pickle
import struct
import tarfile
import zipfile
from dataclasses import replace

import numpy as np
import pytest
import scipy.io
import torch
from PIL import Image

from fedrepro.data.imageops import resize_images
from fedrepro.data.prepared import Split, load_split, save_split
from fedrepro.data.sources.download import download
from fedrepro.data.sources.parsers import parse
from fedrepro.data.sources.rawfiles import safe_unpickle
from fedrepro.data.sources.registry import CORRUPTIONS, DATASETS

RNG = np.random.default_rng(0)


def _images(n, h=32, w=32, c=3):
    return RNG.integers(0, 256, (n, h, w, c), dtype=np.uint8)


def _add_to_tar(tf, name, data):
    info = tarfile.TarInfo(name)
    info.size = len(data)
    tf.addfile(info, io.BytesIO(data))


def _cifar_pickle(images, labels, key):
    flat = images.transpose(0, 3, 1, 2).reshape(len(images), -1)  # R plane, G plane, B plane
    return pickle.dumps({b"data": flat, key: list(map(int, labels))}, protocol=2)


# --- CIFAR ---------------------------------------------------------------------------------------


def test_cifar10_tar_gz_with_two_batches(tmp_path):
    batches = [(_images(4), RNG.integers(0, 10, 4)) for _ in range(3)]
    with tarfile.open(tmp_path / "cifar-10-python.tar.gz", "w:gz") as tf:
        for i, (x, y) in enumerate(batches[:2], start=1):
            _add_to_tar(tf, f"cifar-10-batches-py/data_batch_{i}", _cifar_pickle(x, y, b"labels"))
        _add_to_tar(tf, "cifar-10-batches-py/test_batch", _cifar_pickle(*batches[2], b"labels"))
        names = [f"c{i}".encode() for i in range(10)]
        _add_to_tar(tf, "cifar-10-batches-py/batches.meta", pickle.dumps({b"label_names": names}))
    out = parse("cifar10", tmp_path)
    train, test = out["train"], out["test"]
    assert torch.equal(
        train.images, torch.from_numpy(np.concatenate([batches[0][0], batches[1][0]]))
    )
    assert train.labels.tolist() == [*batches[0][1], *batches[1][1]]
    assert train.labels.dtype == torch.int64 and train.images.dtype == torch.uint8
    assert torch.equal(test.images, torch.from_numpy(batches[2][0]))
    assert train.classes == [f"c{i}" for i in range(10)] and train.domains is None


def test_cifar100_from_extracted_folder_uses_fine_labels(tmp_path):
    folder = tmp_path / "cifar-100-python"
    folder.mkdir()
    x_tr, x_te = _images(3), _images(2)
    for name, x, y in (("train", x_tr, [5, 99, 0]), ("test", x_te, [1, 2])):
        data = pickle.loads(_cifar_pickle(x, y, b"fine_labels"))
        data[b"coarse_labels"] = [0] * len(y)
        (folder / name).write_bytes(pickle.dumps(data, protocol=2))
    out = parse("cifar100", tmp_path)
    assert out["train"].labels.tolist() == [5, 99, 0]
    assert torch.equal(out["test"].images, torch.from_numpy(x_te))
    assert len(out["train"].classes) == 100  # no meta file: registry names


def test_safe_unpickle_refuses_code(tmp_path):
    class Evil:
        def __reduce__(self):
            return (os.system, ("echo owned",))

    with pytest.raises(pickle.UnpicklingError, match="refusing"):
        safe_unpickle(io.BytesIO(pickle.dumps(Evil())))


# --- IDX -----------------------------------------------------------------------------------------


def _idx(array):
    header = b"\x00\x00\x08" + bytes([array.ndim]) + struct.pack(f">{array.ndim}i", *array.shape)
    return gzip.compress(header + array.tobytes())


@pytest.mark.parametrize("name", ["mnist", "fmnist"])
def test_idx_gz(tmp_path, name):
    data = {}
    for prefix, n in (("train", 5), ("t10k", 3)):
        x, y = _images(n, 28, 28, 1)[..., 0], RNG.integers(0, 10, n).astype(np.uint8)
        (tmp_path / f"{prefix}-images-idx3-ubyte.gz").write_bytes(_idx(x))
        (tmp_path / f"{prefix}-labels-idx1-ubyte.gz").write_bytes(_idx(y))
        data[prefix] = (x, y)
    out = parse(name, tmp_path)
    assert out["train"].images.shape == (5, 28, 28, 1)
    assert torch.equal(out["train"].images[..., 0], torch.from_numpy(data["train"][0]))
    assert out["test"].labels.tolist() == data["t10k"][1].tolist()


# --- .mat: SVHN and SynthDigits ------------------------------------------------------------------


def _digit_mat(path, images, labels):
    scipy.io.savemat(path, {"X": images.transpose(1, 2, 3, 0), "y": labels.reshape(-1, 1)})


def test_svhn_mat_maps_label_10_to_0(tmp_path):
    x_tr, x_te = _images(4), _images(2)
    _digit_mat(tmp_path / "train_32x32.mat", x_tr, np.array([10, 1, 9, 10], np.uint8))
    _digit_mat(tmp_path / "test_32x32.mat", x_te, np.array([3, 10], np.uint8))
    out = parse("svhn", tmp_path)
    assert out["train"].labels.tolist() == [0, 1, 9, 0]
    assert out["test"].labels.tolist() == [3, 0]
    assert torch.equal(out["train"].images, torch.from_numpy(x_tr))


def test_synthdigits_mat_and_pt_gz(tmp_path):
    x_tr, x_te = _images(3), _images(2)
    _digit_mat(tmp_path / "synth_train_32x32.mat", x_tr, np.array([1, 2, 3], np.uint8))
    buffer = io.BytesIO()  # liyxi release: torch-saved (images N×32×32×3, labels)
    torch.save((torch.from_numpy(x_te), torch.tensor([7, 0])), buffer)
    (tmp_path / "synth_test.pt.gz").write_bytes(gzip.compress(buffer.getvalue()))
    out = parse("synthdigits", tmp_path)
    assert torch.equal(out["train"].images, torch.from_numpy(x_tr))
    assert out["test"].labels.tolist() == [7, 0]
    assert torch.equal(out["test"].images, torch.from_numpy(x_te))


# --- MNIST-M -------------------------------------------------------------------------------------


def test_mnistm_pt_tar_gz_and_folder_tree(tmp_path):
    """liyxi's copy (28 px, from keras_mnistm) is resized to the release's 32 px; a 32 px
    class-folder tree is read as is."""
    x_tr = _images(3, 28, 28)
    buffer = io.BytesIO()
    torch.save((torch.from_numpy(x_tr), torch.tensor([4, 5, 6])), buffer)
    with tarfile.open(tmp_path / "mnist_m_train.pt.tar.gz", "w:gz") as tf:
        _add_to_tar(tf, "mnist_m_train.pt", buffer.getvalue())
    x_te = _images(2, 32, 32)
    for i, (img, digit) in enumerate(zip(x_te, (1, 3), strict=True)):
        folder = tmp_path / "mnist_m" / "test" / str(digit)
        folder.mkdir(parents=True)
        Image.fromarray(img).save(folder / f"{i}.png")
    out = parse("mnistm", tmp_path)
    assert torch.equal(out["train"].images, resize_images(torch.from_numpy(x_tr), 32))
    assert out["train"].labels.tolist() == [4, 5, 6]
    assert out["test"].labels.tolist() == [0, 1]  # class folders "1", "3" in sorted order
    assert torch.equal(out["test"].images, torch.from_numpy(x_te))


# --- SYN: Roy et al.'s Synthetic Digits -----------------------------------------------------------


@pytest.fixture
def small_syn(monkeypatch):
    """The registry's SYN counting this tree's 20 / 10 images (the release: 10,000 / 2,000)."""
    monkeypatch.setitem(DATASETS, "syn", replace(DATASETS["syn"], sizes=(20, 10)))


def _syn_tree(root, per_digit=(("imgs_train", 2), ("imgs_valid", 1))):
    """synthetic_digits/imgs_{train,valid}/<digit>/*.jpg as the Kaggle release lays it out,
    40×36 px (so the parser resizes); digit d's images are flat gray 20·d + 10."""
    for folder, n in per_digit:
        for d in range(10):
            for i in range(n):
                flat = np.full((40, 36, 3), 20 * d + 10, np.uint8)
                _jpeg(root / "synthetic_digits" / folder / str(d) / f"img_{i}_{d}.jpg", flat)


def test_syn_folder_tree_in_digit_order_at_32px(tmp_path, small_syn):
    _syn_tree(tmp_path)
    out = parse("syn", tmp_path)
    assert out["train"].images.shape == (20, 32, 32, 3) and out["test"].images.shape[0] == 10
    assert out["train"].labels.tolist() == [d for d in range(10) for _ in range(2)]
    assert out["test"].labels.tolist() == list(range(10))  # valid images: our test split
    for split in out.values():  # each image carries its own digit's gray
        means = split.images.float().mean((1, 2, 3))
        assert torch.allclose(means, 20 * split.labels.float() + 10, atol=2)


def test_syn_from_the_staged_zip(tmp_path, small_syn):
    _syn_tree(tmp_path / "unzipped")
    (tmp_path / "staged").mkdir()
    with zipfile.ZipFile(tmp_path / "staged" / "synthetic-digits.zip", "w") as zf:
        for path in sorted((tmp_path / "unzipped").rglob("*.jpg")):
            zf.write(path, path.relative_to(tmp_path / "unzipped").as_posix())
    out = parse("syn", tmp_path / "staged")
    assert out["train"].labels.tolist() == [d for d in range(10) for _ in range(2)]


def test_syn_is_checked_by_content(tmp_path, small_syn):
    with pytest.raises(FileNotFoundError, match="no synthetic_digits/ folder"):
        parse("syn", tmp_path)
    _syn_tree(tmp_path)
    (tmp_path / "synthetic_digits" / "imgs_valid" / "4" / "img_0_4.jpg").unlink()
    with pytest.raises(ValueError, match=r"imgs_valid: 9 images, expected 10"):
        parse("syn", tmp_path)
    for f in (tmp_path / "synthetic_digits" / "imgs_train" / "7").iterdir():
        f.unlink()
    (tmp_path / "synthetic_digits" / "imgs_train" / "7").rmdir()
    with pytest.raises(FileNotFoundError, match=r"imgs_train: no class folder\(s\) 7"):
        parse("syn", tmp_path)


def test_syn_is_roy_et_al_not_synthdigits():
    """FedPCE §4.1: SYN (Roy et al., 2018) has 10,000 training and 2,000 validation images;
    it is staged by hand (Kaggle) and Digits' fourth domain."""
    spec = DATASETS["syn"]
    assert dict(zip(spec.splits, spec.sizes, strict=True)) == {"train": 10_000, "test": 2_000}
    (remote,) = spec.remote
    assert remote.url is None and remote.extracted == "synthetic_digits"
    assert "prasunroy/synthetic-digits" in remote.note
    assert DATASETS["digits"].components[-1] == "syn"
    assert "synthdigits" in DATASETS["digit5"].components  # FedICON's Digit-5 keeps Ganin's


def test_syn_not_staged_is_one_line_naming_the_file(tmp_path):
    with pytest.raises(FileNotFoundError) as err:
        download("syn", tmp_path)
    message = str(err.value)
    assert "\n" not in message and str(tmp_path / "syn" / "synthetic-digits.zip") in message
    assert "kaggle datasets download -d prasunroy/synthetic-digits" in message


# --- USPS ----------------------------------------------------------------------------------------


def test_usps_libsvm_bz2(tmp_path):
    values = RNG.uniform(-1, 1, (3, 256)).astype(np.float32)
    values[1, 7] = 0.0  # written as absent (sparse), means 0
    lines = []
    for label, row in zip((1, 10, 5), values, strict=True):
        pairs = " ".join(f"{i + 1}:{v:.6f}" for i, v in enumerate(row) if v != 0.0)
        lines.append(f"{label} {pairs}\n")
    for name in ("usps.bz2", "usps.t.bz2"):
        (tmp_path / name).write_bytes(bz2.compress("".join(lines).encode()))
    out = parse("usps", tmp_path)
    written = np.array([[float(f"{v:.6f}") for v in row] for row in values], np.float32)
    expected = ((written + 1) / 2 * 255).astype(np.uint8).reshape(3, 16, 16, 1)
    assert out["train"].labels.tolist() == [0, 9, 4]
    assert torch.equal(out["test"].images, torch.from_numpy(expected))
    assert out["train"].images[1, 0, 7, 0] == 127


# --- Tiny-ImageNet -------------------------------------------------------------------------------


def _jpeg(path, array):
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(array).save(path, format="JPEG", quality=95)
    with Image.open(path) as img:
        return np.array(img.convert("RGB"))


def test_tinyimagenet_reads_val_labels_from_annotations(tmp_path):
    root = tmp_path / "tiny-imagenet-200"
    wnids = ["n02", "n01"]
    (root / "wnids.txt").parent.mkdir(parents=True)
    (root / "wnids.txt").write_text("\n".join(wnids))
    train = {
        w: [
            _jpeg(root / "train" / w / "images" / f"{w}_{i}.JPEG", _images(1, 64, 64)[0])
            for i in range(2)
        ]
        for w in wnids
    }
    val_rows, val_images = [], []
    for i, wnid in enumerate(["n02", "n01", "n02"]):
        val_images.append(_jpeg(root / "val" / "images" / f"val_{i}.JPEG", _images(1, 64, 64)[0]))
        val_rows.append(f"val_{i}.JPEG\t{wnid}\t0\t0\t63\t63")
    (root / "val" / "val_annotations.txt").write_text("\n".join(val_rows) + "\n")
    out = parse("tinyimagenet", tmp_path)
    assert out["train"].classes == ["n01", "n02"]  # ImageFolder (sorted) order
    assert out["train"].labels.tolist() == [0, 0, 1, 1]
    assert torch.equal(out["train"].images[0], torch.from_numpy(train["n01"][0]))
    assert out["test"].labels.tolist() == [1, 0, 1]  # not one class: annotations were read
    assert torch.equal(out["test"].images, torch.from_numpy(np.stack(val_images)))
    assert parse("tinyimagenet", tmp_path, size=32)["test"].images.shape == (3, 32, 32, 3)


# --- multi-domain folder trees -------------------------------------------------------------------


def _domain_tree(root, domains, classes, per_class, size=12):
    files = {}
    for domain in domains:
        for cls in classes:
            for i in range(per_class):
                path = root / domain / cls / f"{domain}_{cls}_{i}.png"
                path.parent.mkdir(parents=True, exist_ok=True)
                img = _images(1, size + i, size, 3)[0]  # differing sizes, as real photos
                Image.fromarray(img).save(path)
                files[f"{domain}/{cls}/{path.name}"] = img
    return files


def test_office_tree_default_split_resizes_and_fills_domains(tmp_path):
    domains = ("amazon", "caltech", "dslr", "webcam")
    _domain_tree(tmp_path / "office_caltech_10", domains, ["bike", "mug"], per_class=5)
    out = parse("office10", tmp_path, size=8)
    train, test = out["train"], out["test"]
    assert train.images.shape == (4 * 2 * 4, 8, 8, 3) and len(test.labels) == 4 * 2 * 1
    assert train.domain_names == list(domains)
    assert torch.bincount(train.domains).tolist() == [8, 8, 8, 8]
    assert sorted(set(train.labels.tolist())) == [1, 8]  # registry ids of bike, mug


def test_domainnet_tree_follows_fedbn_split_pickles_in_order(tmp_path):
    domains = ("clipart", "infograph", "painting", "quickdraw", "real", "sketch")
    files = _domain_tree(tmp_path, domains, ["bird", "zebra"], per_class=2)
    split_dir = tmp_path / "DomainNet"
    split_dir.mkdir()
    for domain in domains:
        keys = sorted(k for k in files if k.startswith(domain + "/"))
        train_keys, test_keys = keys[::-1][:3], keys[::-1][3:]
        for split, chosen in (("train", train_keys), ("test", test_keys)):
            paths = np.array([f"../data/DomainNet/{k}" for k in chosen])
            labels = np.array([k.split("/")[1] for k in chosen])
            (split_dir / f"{domain}_{split}.pkl").write_bytes(pickle.dumps((paths, labels)))
    out = parse("domainnet", tmp_path, size=12)
    first = sorted(k for k in files if k.startswith("clipart/"))[::-1][:3]
    assert out["train"].labels[:3].tolist() == [9 if "zebra" in k else 0 for k in first]
    resized = [Image.fromarray(files[k]).resize((12, 12), Image.BILINEAR) for k in first]
    expected = np.stack([np.asarray(img) for img in resized])
    assert torch.equal(out["train"].images[:3], torch.from_numpy(expected))
    assert out["test"].domains.tolist() == [0, 1, 2, 3, 4, 5]


# --- CIFAR-10-C and CIFAR-10.1 -------------------------------------------------------------------


def test_cifar10c_npy_domains_are_corruption_and_severity(tmp_path):
    root = tmp_path / "CIFAR-10-C"
    root.mkdir()
    per = 2  # images per severity
    labels = np.tile(np.array([3, 7], np.uint8), 5)
    np.save(root / "labels.npy", labels)
    arrays = {}
    for name in (*CORRUPTIONS, "speckle_noise"):  # extras are ignored
        arrays[name] = _images(5 * per)
        np.save(root / f"{name}.npy", arrays[name])
    (test,) = parse("cifar10c", tmp_path).values()
    assert len(test.labels) == 15 * 5 * per
    assert test.labels[:4].tolist() == [3, 7, 3, 7]
    assert test.domains[:10].tolist() == [0, 0, 1, 1, 2, 2, 3, 3, 4, 4]
    assert test.domain_names[test.domains[-1]] == "jpeg_compression@5"
    assert torch.equal(test.images[5 * per : 10 * per], torch.from_numpy(arrays["shot_noise"]))


def test_cifar101_v6_npy(tmp_path):
    x = _images(4)
    np.save(tmp_path / "cifar10.1_v6_data.npy", x)
    np.save(tmp_path / "cifar10.1_v6_labels.npy", np.array([0, 9, 2, 2], np.int32))
    (test,) = parse("cifar101", tmp_path).values()
    assert torch.equal(test.images, torch.from_numpy(x))
    assert test.labels.tolist() == [0, 9, 2, 2] and test.labels.dtype == torch.int64


def test_parse_size_resizes_fixed_size_formats(tmp_path):
    np.save(tmp_path / "cifar10.1_v6_data.npy", _images(2))
    np.save(tmp_path / "cifar10.1_v6_labels.npy", np.array([0, 1]))
    assert parse("cifar101", tmp_path, size=16)["test"].images.shape == (2, 16, 16, 3)


def test_synthetic_only_dataset_has_no_parser(tmp_path):
    with pytest.raises(ValueError, match="pretrain_source is synthetic only"):
        parse("pretrain_source", tmp_path)


def test_missing_files_name_what_was_expected(tmp_path):
    with pytest.raises(FileNotFoundError, match="train_32x32.mat"):
        parse("svhn", tmp_path)


# --- prepared split files ------------------------------------------------------------------------


def test_split_round_trip_keeps_tensors_and_metadata(tmp_path):
    split = Split(
        images=torch.from_numpy(_images(3, 8, 8)),
        labels=torch.tensor([2, 0, 1]),
        domains=torch.tensor([0, 1, 1]),
        classes=["a", "b", "c"],
        domain_names=["d0", "d1"],
    )
    path = tmp_path / "sub" / "test.safetensors"
    save_split(path, split, {"dataset": "toy", "split": "test", "scale": "mini"})
    assert [p.name for p in path.parent.iterdir()] == ["test.safetensors"]  # no temp left
    back = load_split(path)
    assert torch.equal(back.images, split.images) and torch.equal(back.labels, split.labels)
    assert torch.equal(back.domains, split.domains)
    assert (back.classes, back.domain_names) == (split.classes, split.domain_names)
    from safetensors import safe_open

    with safe_open(str(path), framework="pt") as handle:
        assert handle.metadata()["dataset"] == "toy"


def test_save_split_rejects_wrong_dtypes_and_leaves_no_file(tmp_path):
    bad = Split(torch.zeros(2, 4, 4, 3), torch.tensor([0, 1]), None, ["a"], [])
    with pytest.raises(ValueError, match="uint8"):
        save_split(tmp_path / "x.safetensors", bad, {})
    assert list(tmp_path.iterdir()) == []

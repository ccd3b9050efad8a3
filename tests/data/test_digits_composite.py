"""FedPCE's Digits: MNIST, SVHN, USPS and SYN (Roy et al.'s Synthetic Digits) as the four
domains of ``digits``, all 32 px RGB; synthesized per component at mini scale, composed from
the components' own raw folders at paper scale (tiny fake files here, no network)."""

import bz2
import gzip
import struct
from dataclasses import replace

import numpy as np
import pytest
import scipy.io
import torch
from PIL import Image

from fedrepro.data.build import prepare
from fedrepro.data.imageops import resize_images
from fedrepro.data.prepared import Split, load_split
from fedrepro.data.sources import composite
from fedrepro.data.sources.composite import parse_composite, raw_sources, to_channels
from fedrepro.data.sources.parsers import parse
from fedrepro.data.sources.registry import DATASETS, DIGITS, DatasetSpec, get_dataset
from fedrepro.data.synthetic.analogs import synthesize

DOMAINS = ["mnist", "svhn", "usps", "syn"]
RNG = np.random.default_rng(0)


def test_registry_entry_is_a_composite_of_the_four_digit_datasets():
    spec = get_dataset("digits")
    assert spec.components == spec.domains == tuple(DOMAINS)
    assert (spec.channels, spec.image_size, spec.splits) == (3, 32, ("train", "test"))
    assert spec.classes == DIGITS and spec.remote == () and spec.parser == ""
    assert all(get_dataset(c).classes == DIGITS for c in spec.components)
    assert get_dataset("mnist").components == ()


def test_a_composite_must_name_its_components_as_domains():
    with pytest.raises(ValueError, match="domains are its components"):
        DatasetSpec("bad", DIGITS, 3, 32, ("train",), domains=("a",), components=("b",))


def test_raw_sources_are_the_components_for_digits_and_itself_otherwise():
    assert raw_sources("digits") == tuple(DOMAINS)
    assert raw_sources("mnist") == ("mnist",)
    assert raw_sources("domainnet") == ("domainnet",)


def test_to_channels_repeats_gray_and_refuses_other_counts():
    gray = torch.arange(2 * 4 * 4, dtype=torch.uint8).reshape(2, 4, 4, 1)
    rgb = to_channels(gray, 3)
    assert rgb.shape == (2, 4, 4, 3) and rgb.is_contiguous()
    assert all(torch.equal(rgb[..., c], gray[..., 0]) for c in range(3))
    assert to_channels(rgb, 3) is rgb
    with pytest.raises(ValueError, match="cannot turn 3 channels into 4"):
        to_channels(rgb, 4)


# --- mini scale ----------------------------------------------------------------------------------


def test_mini_synthesis_gives_four_domains_of_ten_classes_at_32px_rgb():
    per_class = 2
    split = synthesize("digits", "train", per_class)
    assert split.images.shape == (4 * 10 * per_class, 32, 32, 3)
    assert split.images.dtype == torch.uint8
    assert split.domain_names == DOMAINS and split.classes == list(DIGITS)
    assert split.domains is not None and split.domains.dtype == torch.int64
    block = 10 * per_class  # domains in registry order, one block each
    assert split.domains.tolist() == [d for d in range(4) for _ in range(block)]
    for d in range(4):
        counts = torch.bincount(split.labels[split.domains == d], minlength=10)
        assert counts.tolist() == [per_class] * 10


def test_mini_domains_are_the_components_analogs():
    split = synthesize("digits", "test", 3)
    img = {name: split.images[split.domains == d].float() for d, name in enumerate(DOMAINS)}
    for gray in ("mnist", "usps"):  # 1-channel renders repeated: three equal channels
        assert torch.equal(img[gray][..., 0], img[gray][..., 1])
        assert torch.equal(img[gray][..., 0], img[gray][..., 2])
    for colour in ("svhn", "syn"):
        assert not torch.equal(img[colour][..., 0], img[colour][..., 1])
    means = torch.stack([img[name].mean(0) for name in DOMAINS]).flatten(1)
    assert torch.cdist(means, means).triu(1)[torch.ones(4, 4).triu(1).bool()].min() > 100


def test_mini_prepare_writes_both_splits_with_domains(tmp_path):
    prepare("digits", "mini", tmp_path, per_class_train=1, per_class_test=1, size=16, seed=2)
    for name in ("train", "test"):
        split = load_split(tmp_path / f"{name}.safetensors")
        assert split.images.shape == (40, 16, 16, 3)
        assert split.domain_names == DOMAINS
        assert split.domains is not None and sorted(set(split.domains.tolist())) == [0, 1, 2, 3]


# --- paper scale ---------------------------------------------------------------------------------


def _idx(array):
    header = struct.pack(">BBBB", 0, 0, 8, array.ndim) + struct.pack(
        f">{array.ndim}i", *array.shape
    )
    return gzip.compress(header + array.astype(np.uint8).tobytes())


def _mat(path, images, labels):  # SVHN layout: X is H×W×C×N, y holds 1..10 (10 = digit 0)
    y = np.where(labels == 0, 10, labels).reshape(-1, 1).astype(np.uint8)
    scipy.io.savemat(path, {"X": images.transpose(1, 2, 3, 0), "y": y})


def _usps_lines(labels):
    rows = []
    for label in labels:
        pixels = RNG.uniform(-1, 1, 256)
        rows.append(f"{label + 1} " + " ".join(f"{i + 1}:{v:.4f}" for i, v in enumerate(pixels)))
    return ("\n".join(rows) + "\n").encode()


def _fake_raw_tree(root):
    """Tiny raw files of the four components, each in its real on-disk format and folder
    (SYN: the Kaggle release's synthetic_digits/imgs_{train,valid}/<digit>/ tree, all ten
    folders, images in the first few); returns the (train, test) images per component."""
    counts = {"mnist": (3, 2), "svhn": (2, 2), "usps": (2, 1), "syn": (2, 3)}
    (root / "mnist").mkdir(parents=True)
    for prefix, n in zip(("train", "t10k"), counts["mnist"], strict=True):
        images = RNG.integers(0, 256, (n, 28, 28))
        (root / "mnist" / f"{prefix}-images-idx3-ubyte.gz").write_bytes(_idx(images))
        (root / "mnist" / f"{prefix}-labels-idx1-ubyte.gz").write_bytes(_idx(np.arange(n) % 10))
    (root / "svhn").mkdir()
    for split, i in (("train", 0), ("test", 1)):
        n = counts["svhn"][i]
        _mat(root / "svhn" / f"{split}_32x32.mat", _rgb(n, 32), np.arange(n) % 10)
        tree = root / "syn" / "synthetic_digits" / ("imgs_train", "imgs_valid")[i]
        for d in range(10):
            (tree / str(d)).mkdir(parents=True)
            if d < counts["syn"][i]:
                Image.fromarray(_rgb(1, 40)[0]).save(tree / str(d) / "a.png")
    (root / "usps").mkdir()
    for name, n in zip(("usps.bz2", "usps.t.bz2"), counts["usps"], strict=True):
        (root / "usps" / name).write_bytes(bz2.compress(_usps_lines(np.arange(n) % 10)))
    return counts


def _rgb(n, size):
    return RNG.integers(0, 256, (n, size, size, 3), dtype=np.uint8)


def test_paper_prepare_composes_the_components_raw_folders(tmp_path, monkeypatch):
    monkeypatch.setitem(DATASETS, "syn", replace(DATASETS["syn"], sizes=(2, 3)))  # this tree's
    root = tmp_path / "data_root"
    counts = _fake_raw_tree(root)
    for component in DOMAINS:  # the registry counting this tree's images (checked on prepare)
        sizes = tuple(counts[component])
        monkeypatch.setitem(DATASETS, component, replace(DATASETS[component], sizes=sizes))
    out = tmp_path / "prepared"
    prepare("digits", "paper", out, raw_dir=root / "digits")  # digits/ itself need not exist
    for i, name in enumerate(("train", "test")):
        split = load_split(out / f"{name}.safetensors")
        sizes = [counts[c][i] for c in DOMAINS]
        assert split.images.shape == (sum(sizes), 32, 32, 3)
        assert split.domain_names == DOMAINS and split.classes == list(DIGITS)
        assert split.domains is not None
        assert split.domains.tolist() == [d for d, n in enumerate(sizes) for _ in range(n)]
        for d, component in enumerate(DOMAINS):
            own = parse(component, root / component)[name]
            block = split.domains == d
            assert torch.equal(split.labels[block], own.labels)
            expected = to_channels(resize_images(own.images, 32), 3)  # bilinear, gray → RGB
            assert torch.equal(split.images[block], expected)
    native = {c: parse(c, root / c)["train"].images.shape[1:] for c in DOMAINS}
    assert native == {  # so MNIST and USPS were resized and made RGB
        "mnist": (28, 28, 1), "svhn": (32, 32, 3), "usps": (16, 16, 1), "syn": (32, 32, 3)
    }  # fmt: skip


def test_paper_composition_reads_sibling_folders_at_the_requested_size(tmp_path, monkeypatch):
    calls = []

    def fake_parse(name, raw_dir, size=None):
        calls.append((name, raw_dir, size))
        spec = get_dataset(name)
        return {
            split: Split(
                images=torch.full((n, size, size, spec.channels), n, dtype=torch.uint8),
                labels=torch.arange(n, dtype=torch.int64),
                domains=None,
                classes=list(spec.classes),
                domain_names=[],
            )
            for split, n in (("train", 2), ("test", 1))
        }

    monkeypatch.setattr(composite, "parse", fake_parse)
    out = parse_composite("digits", tmp_path / "digits", size=24)
    assert calls == [(c, tmp_path / c, 24) for c in DOMAINS]
    assert out["train"].images.shape == (8, 24, 24, 3)
    assert out["test"].domains.tolist() == [0, 1, 2, 3]
    assert out["train"].domain_names == DOMAINS


def test_parse_composite_refuses_an_ordinary_dataset(tmp_path):
    with pytest.raises(ValueError, match="mnist is not a composite"):
        parse_composite("mnist", tmp_path)

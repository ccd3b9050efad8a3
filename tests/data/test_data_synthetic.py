"""Synthetic analogs: determinism, structure per dataset, learnable signal, corruptions."""

import pytest
import torch

from fedrepro.data.build import prepare
from fedrepro.data.prepared import load_split
from fedrepro.data.sources.registry import DATASETS, get_dataset
from fedrepro.data.synthetic.analogs import synthesize
from fedrepro.data.transforms.corruptions import COMMON9, CORRUPTIONS, corrupt, random_corruptions

SIZE = 16  # small images keep the suite fast; rendering happens at native size anyway


def test_same_seed_same_bytes_other_seed_or_split_differs():
    a = synthesize("svhn", "train", 3, SIZE, seed=0)
    b = synthesize("svhn", "train", 3, SIZE, seed=0)
    assert torch.equal(a.images, b.images) and torch.equal(a.labels, b.labels)
    assert not torch.equal(synthesize("svhn", "train", 3, SIZE, seed=1).images, a.images)
    assert not torch.equal(synthesize("svhn", "test", 3, SIZE, seed=0).images, a.images)


@pytest.mark.parametrize("name", sorted(DATASETS))
def test_shapes_classes_channels_domains_and_balance(name):
    spec = get_dataset(name)
    per_class = 2
    split = synthesize(name, spec.splits[-1], per_class, SIZE, seed=0)
    n_domains = len(spec.domains) or 1
    n = spec.num_classes * per_class * n_domains
    assert split.images.shape == (n, SIZE, SIZE, spec.channels)
    assert split.images.dtype == torch.uint8 and split.labels.dtype == torch.int64
    assert split.classes == list(spec.classes) and split.domain_names == list(spec.domains)
    assert split.images.float().std() > 10  # not blank
    if spec.domains:
        assert split.domains is not None and split.domains.dtype == torch.int64
        for d in range(n_domains):
            counts = torch.bincount(split.labels[split.domains == d], minlength=spec.num_classes)
            assert counts.tolist() == [per_class] * spec.num_classes
    else:
        assert split.domains is None
        assert torch.bincount(split.labels).tolist() == [per_class] * spec.num_classes


def test_native_size_by_default_and_test_only_splits():
    assert synthesize("usps", "train", 1).images.shape[1:] == (16, 16, 1)
    assert synthesize("mnistm", "test", 1).images.shape[1:] == (32, 32, 3)  # the release side
    with pytest.raises(ValueError, match="cifar101 has splits test"):
        synthesize("cifar101", "train", 1)


def test_cifar10c_is_the_cifar10_test_analog_corrupted():
    clean = synthesize("cifar10", "test", 1, SIZE, seed=3)
    c10c = synthesize("cifar10c", "test", 1, SIZE, seed=3)
    fog3 = get_dataset("cifar10c").domains.index("fog@3")
    assert fog3 == CORRUPTIONS.index("fog") * 5 + 2
    block = c10c.domains == fog3
    assert torch.equal(c10c.labels[block], clean.labels)
    assert torch.equal(c10c.images[block], corrupt(clean.images, "fog", 3, seed=3))


def _nearest_centroid_accuracy(name, per_class=40, size=SIZE):
    train = synthesize(name, "train", per_class, size, seed=0)
    test = synthesize(name, "test", per_class // 2, size, seed=0)
    x_tr, x_te = train.images.flatten(1).float(), test.images.flatten(1).float()
    centroids = torch.stack([x_tr[train.labels == c].mean(0) for c in range(len(train.classes))])
    pred = torch.cdist(x_te, centroids).argmin(1)
    return (pred == test.labels).float().mean().item()


@pytest.mark.parametrize(("name", "floor"), [("mnist", 0.5), ("fmnist", 0.4), ("usps", 0.5)])
def test_classes_carry_signal_a_trivial_classifier_finds(name, floor):
    """Nearest class mean on raw pixels: far above chance (0.1), yet not solved."""
    acc = _nearest_centroid_accuracy(name)
    assert floor < acc < 0.98


def test_cifar101_is_a_shifted_draw_of_the_cifar10_classes():
    c10 = synthesize("cifar10", "test", 50, SIZE, seed=0).images.float()
    c101 = synthesize("cifar101", "test", 50, SIZE, seed=0).images.float()
    other_seed = synthesize("cifar10", "test", 50, SIZE, seed=1).images.float()
    shift = (c10.mean((0, 1, 2)) - c101.mean((0, 1, 2))).abs().sum()
    noise = (c10.mean((0, 1, 2)) - other_seed.mean((0, 1, 2))).abs().sum()
    assert shift > noise  # colour statistics move more than between two seeds


def test_domains_differ_in_style():
    split = synthesize("domainnet", "train", 3, SIZE, seed=0)
    x = split.images.float()
    quickdraw = x[split.domains == split.domain_names.index("quickdraw")]
    real = x[split.domains == split.domain_names.index("real")]
    # quickdraw: gray line drawings on white; real: coloured textured scenes
    assert (quickdraw[..., 0] == quickdraw[..., 1]).all()
    assert quickdraw.mean() > real.mean()
    assert real.std(-1).mean() > 5


@pytest.mark.parametrize("corruption", CORRUPTIONS)
def test_corruption_damage_grows_with_severity(corruption):
    clean = synthesize("cifar10", "test", 3, 32, seed=0).images
    damage = [
        (corrupt(clean, corruption, s, seed=0).float() - clean.float()).abs().mean().item()
        for s in range(1, 6)
    ]
    assert damage[0] > 0.3
    assert all(a < b for a, b in zip(damage, damage[1:], strict=False)), damage


def test_corrupt_keeps_shape_and_dtype_and_checks_arguments():
    gray = synthesize("mnist", "test", 1, 28, seed=0).images
    out = corrupt(gray, "jpeg_compression", 5)
    assert out.shape == gray.shape and out.dtype == torch.uint8
    with pytest.raises(ValueError, match="unknown corruption"):
        corrupt(gray, "rain", 1)
    with pytest.raises(ValueError, match="severity"):
        corrupt(gray, "fog", 6)


@pytest.mark.parametrize("dataset", ["cifar10", "mnist"])
def test_jpeg_compression_is_libjpeg_at_the_published_quality(dataset):
    """The pixels of Hendrycks & Dietterich's PIL save at each severity's quality (the 8×8
    DCT approximation before issue 32 differed by about one grey level on average); the
    damage grows as the quality falls."""
    import io

    import numpy as np
    from PIL import Image

    clean = synthesize(dataset, "test", 1, 32, seed=0).images[:4]
    damage = []
    for severity, quality in enumerate([80, 65, 58, 50, 40], start=1):
        out = corrupt(clean, "jpeg_compression", severity)
        for image, ours in zip(clean.numpy(), out, strict=True):
            buffer = io.BytesIO()
            Image.fromarray(image.squeeze(-1) if image.shape[-1] == 1 else image).save(
                buffer, format="JPEG", quality=quality
            )
            pil = np.asarray(Image.open(buffer)).reshape(image.shape)
            assert np.array_equal(ours.numpy(), pil), severity
        assert torch.equal(out, corrupt(clean, "jpeg_compression", severity))  # deterministic
        damage.append((out.float() - clean.float()).abs().mean().item())
    assert all(a < b for a, b in zip(damage, damage[1:], strict=False)), damage


def test_random_corruptions_draw_one_corruption_per_image():
    clean = synthesize("svhn", "test", 2, SIZE, seed=0).images
    out, choice = random_corruptions(clean, severity=5, seed=1, names=COMMON9)
    assert out.shape == clean.shape and choice.max() < len(COMMON9)
    first = choice[0].item()
    assert torch.equal(out[:1], corrupt(clean[:1], COMMON9[first], 5, seed=1))


def test_prepare_mini_writes_every_split_with_metadata(tmp_path):
    paths = prepare("office10", "mini", tmp_path, per_class_train=1, per_class_test=1, size=8)
    assert sorted(p.name for p in paths) == ["test.safetensors", "train.safetensors"]
    train = load_split(tmp_path / "train.safetensors")
    assert train.images.shape == (40, 8, 8, 3)
    assert train.domain_names == ["amazon", "caltech", "dslr", "webcam"]
    assert torch.equal(train.images, synthesize("office10", "train", 1, 8, seed=0).images)
    (only,) = prepare("cifar101", "mini", tmp_path / "c101", per_class_test=1, size=8)
    assert only.name == "test.safetensors"
    with pytest.raises(ValueError, match="raw_dir"):
        prepare("cifar10", "paper", tmp_path)
    with pytest.raises(ValueError, match="unknown scale"):
        prepare("cifar10", "huge", tmp_path)

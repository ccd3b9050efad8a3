"""Registry completeness: every dataset the papers use, with the right shape facts."""

import re

import pytest

from fedrepro.data.sources.registry import (
    CIFAR100_SUPERCLASSES,
    CORRUPTIONS,
    DATASETS,
    get_dataset,
)

EXPECTED = {  # name: (classes, channels, native size, splits, domains)
    "cifar10": (10, 3, 32, ("train", "test"), 0),
    "cifar100": (100, 3, 32, ("train", "test"), 0),
    "svhn": (10, 3, 32, ("train", "test"), 0),
    "fmnist": (10, 1, 28, ("train", "test"), 0),
    "mnist": (10, 1, 28, ("train", "test"), 0),
    "usps": (10, 1, 16, ("train", "test"), 0),
    "synthdigits": (10, 3, 32, ("train", "test"), 0),
    "syn": (10, 3, 32, ("train", "test"), 0),
    "mnistm": (10, 3, 32, ("train", "test"), 0),
    "digits": (10, 3, 32, ("train", "test"), 4),
    "digit5": (10, 3, 32, ("train", "test"), 5),
    "tinyimagenet": (200, 3, 64, ("train", "test"), 0),
    "domainnet": (10, 3, 224, ("train", "test"), 6),
    "office10": (10, 3, 256, ("train", "test"), 4),
    "cifar10c": (10, 3, 32, ("test",), 75),
    "cifar101": (10, 3, 32, ("test",), 0),
    "pretrain_source": (128, 3, 32, ("train", "test"), 0),
}


def test_registry_has_exactly_the_expected_datasets():
    assert set(DATASETS) == set(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_shape_facts(name):
    spec = get_dataset(name)
    classes, channels, size, splits, domains = EXPECTED[name]
    assert spec.name == name
    assert spec.num_classes == classes == len(set(spec.classes))
    assert (spec.channels, spec.image_size, spec.splits) == (channels, size, splits)
    assert len(spec.domains) == domains


def test_real_class_and_domain_names():
    assert get_dataset("cifar10").classes[:3] == ("airplane", "automobile", "bird")
    assert get_dataset("fmnist").classes[9] == "Ankle boot"
    assert get_dataset("mnist").classes == tuple("0123456789")
    assert get_dataset("domainnet").domains == (
        "clipart", "infograph", "painting", "quickdraw", "real", "sketch"
    )  # fmt: skip
    assert get_dataset("domainnet").classes[-1] == "zebra"
    assert get_dataset("office10").domains == ("amazon", "caltech", "dslr", "webcam")
    assert get_dataset("office10").classes[0] == "back_pack"
    assert get_dataset("cifar10c").domains[:6] == (
        "gaussian_noise@1", "gaussian_noise@2", "gaussian_noise@3",
        "gaussian_noise@4", "gaussian_noise@5", "shot_noise@1",
    )  # fmt: skip
    assert len(CORRUPTIONS) == 15


def test_cifar100_fine_labels_are_alphabetical_and_grouped_by_20_superclasses():
    classes = get_dataset("cifar100").classes
    assert list(classes) == sorted(classes)
    assert len(CIFAR100_SUPERCLASSES) == 20
    members = [c for group in CIFAR100_SUPERCLASSES.values() for c in group]
    assert sorted(members) == list(classes)
    assert all(len(group) == 5 for group in CIFAR100_SUPERCLASSES.values())


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_remote_files_are_checksummed_or_explained(name):
    spec = get_dataset(name)
    if name == "pretrain_source":
        assert spec.remote == () and spec.parser == ""
        return
    if spec.components:  # composite: built from its components' files (checked as theirs)
        assert spec.remote == () and spec.parser == ""
        assert all(get_dataset(c).remote for c in spec.components)
        return
    assert spec.remote and spec.parser
    for remote in spec.remote:
        assert remote.dataset == name
        assert remote.filename and "/" not in remote.filename
        if remote.md5:
            assert re.fullmatch(r"[0-9a-f]{32}", remote.md5)
        if remote.sha256:
            assert re.fullmatch(r"[0-9a-f]{64}", remote.sha256)
        if remote.url is None:  # Google Drive or Kaggle only: the note says where and what
            assert ("Google Drive" in remote.note or "Kaggle" in remote.note) and (
                remote.filename in remote.note
            )
        else:
            assert remote.url.startswith(("http://", "https://"))
            assert remote.url.endswith(remote.filename)
            assert remote.md5 or remote.sha256


def test_published_checksums_are_recorded():
    (cifar,) = get_dataset("cifar10").remote
    assert cifar.md5 == "c58f30108f718f92721af3b95e74349a"
    assert cifar.size == 170_498_071
    svhn = {r.filename: r for r in get_dataset("svhn").remote}
    assert svhn["test_32x32.mat"].md5 == "eb5a983be6a315427106f1b164d9cef3"
    office = get_dataset("office10").remote
    assert [r.url for r in office] == [None]


def test_unknown_dataset_error_names_it_and_lists_allowed():
    with pytest.raises(ValueError) as err:
        get_dataset("imagenet")
    message = str(err.value)
    assert "\n" not in message
    assert "'imagenet'" in message
    assert all(name in message for name in EXPECTED)

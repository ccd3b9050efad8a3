"""Dataset registry: one frozen record per dataset, the single source of truth for class
names, channels, sizes, splits, domains, remote files and the parser that reads them.

Checksums and URLs are the ones torchvision and TensorFlow Datasets publish for these files
(docs/data.md lists them with their sources). Files whose only source is Google Drive or
Kaggle carry no URL: they must be staged by hand under ``<data_root>/<dataset>/`` and their
``note`` says where to get them.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "CIFAR100_SUPERCLASSES",
    "CORRUPTIONS",
    "DATASETS",
    "DIGITS_DOMAINS",
    "DIGIT5_DOMAINS",
    "DatasetSpec",
    "RemoteFile",
    "get_dataset",
    "image_count",
    "raw_sources",
    "split_sizes",
]


@dataclass(frozen=True)
class RemoteFile:
    """One raw file of a dataset. ``url=None`` means it can only be pre-staged."""

    dataset: str
    filename: str
    url: str | None
    md5: str | None = None
    sha256: str | None = None
    size: int | None = None
    note: str = ""
    extracted: str | None = None  # staged-only: a folder that may stand in for the archive
    # A .gz file: md5 of its decompressed content. A copy re-compressed by a mirror (other
    # compressed bytes, same content) or the decompressed file itself is then accepted too.
    content_md5: str | None = None

    @property
    def content_filename(self) -> str | None:
        """The name the decompressed file may be staged under (``content_md5`` set only)."""
        return self.filename.removesuffix(".gz") if self.content_md5 else None


@dataclass(frozen=True)
class DatasetSpec:
    """What every layer needs to know about a dataset, real or synthetic."""

    name: str
    classes: tuple[str, ...]
    channels: int
    image_size: int  # native side length; folder-tree datasets are resized to it by default
    splits: tuple[str, ...]
    domains: tuple[str, ...] = ()
    remote: tuple[RemoteFile, ...] = ()
    parser: str = ""  # key into fedrepro.data.sources.parsers; "" = synthetic only (mini scale)
    # A composite dataset: one domain per component dataset (same names, same order), built
    # from the components' own files (fedrepro.data.sources.composite); it has no remote files.
    components: tuple[str, ...] = ()
    # Images per split (``splits`` order) of the real dataset, as its source publishes them:
    # the paper-scale cost counts with them (fedrepro.cost.estimate) and a staged copy without a
    # checksum is checked against them. Empty: not recorded (a composite: its components').
    sizes: tuple[int, ...] = ()
    # Files a split list (FedBN's pickles) may name that the pinned release lacks: left out,
    # named in the preparation log and the prepared file; more are refused. ``absent_why``
    # says which files and why they may be missing.
    absent_allowed: int = 0
    absent_why: str = ""

    def __post_init__(self) -> None:
        if self.components and (self.components != self.domains or self.remote or self.parser):
            raise ValueError(
                f"{self.name}: a composite's domains are its components, and it has no "
                "remote files or parser of its own"
            )
        if self.sizes and len(self.sizes) != len(self.splits):
            raise ValueError(f"{self.name}: sizes {self.sizes} do not match splits {self.splits}")

    @property
    def num_classes(self) -> int:
        return len(self.classes)


DIGITS = tuple(str(d) for d in range(10))
CIFAR10_CLASSES = (
    "airplane", "automobile", "bird", "cat", "deer",
    "dog", "frog", "horse", "ship", "truck",
)  # fmt: skip
FMNIST_CLASSES = (
    "T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
    "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot",
)  # fmt: skip

# CIFAR-100 fine labels grouped by their 20 coarse superclasses (the real grouping).
CIFAR100_SUPERCLASSES: dict[str, tuple[str, ...]] = {
    "aquatic_mammals": ("beaver", "dolphin", "otter", "seal", "whale"),
    "fish": ("aquarium_fish", "flatfish", "ray", "shark", "trout"),
    "flowers": ("orchid", "poppy", "rose", "sunflower", "tulip"),
    "food_containers": ("bottle", "bowl", "can", "cup", "plate"),
    "fruit_and_vegetables": ("apple", "mushroom", "orange", "pear", "sweet_pepper"),
    "household_electrical_devices": ("clock", "keyboard", "lamp", "telephone", "television"),
    "household_furniture": ("bed", "chair", "couch", "table", "wardrobe"),
    "insects": ("bee", "beetle", "butterfly", "caterpillar", "cockroach"),
    "large_carnivores": ("bear", "leopard", "lion", "tiger", "wolf"),
    "large_man-made_outdoor_things": ("bridge", "castle", "house", "road", "skyscraper"),
    "large_natural_outdoor_scenes": ("cloud", "forest", "mountain", "plain", "sea"),
    "large_omnivores_and_herbivores": ("camel", "cattle", "chimpanzee", "elephant", "kangaroo"),
    "medium_mammals": ("fox", "porcupine", "possum", "raccoon", "skunk"),
    "non-insect_invertebrates": ("crab", "lobster", "snail", "spider", "worm"),
    "people": ("baby", "boy", "girl", "man", "woman"),
    "reptiles": ("crocodile", "dinosaur", "lizard", "snake", "turtle"),
    "small_mammals": ("hamster", "mouse", "rabbit", "shrew", "squirrel"),
    "trees": ("maple_tree", "oak_tree", "palm_tree", "pine_tree", "willow_tree"),
    "vehicles_1": ("bicycle", "bus", "motorcycle", "pickup_truck", "train"),
    "vehicles_2": ("lawn_mower", "rocket", "streetcar", "tank", "tractor"),
}
# Fine label ids are alphabetical, as in the pickle's `fine_label_names`.
CIFAR100_CLASSES = tuple(sorted(c for group in CIFAR100_SUPERCLASSES.values() for c in group))

DOMAINNET_CLASSES = (
    "bird", "feather", "headphones", "ice_cream", "teapot",
    "tiger", "whale", "windmill", "wine_glass", "zebra",
)  # fmt: skip
DOMAINNET_DOMAINS = ("clipart", "infograph", "painting", "quickdraw", "real", "sketch")
OFFICE_CLASSES = (
    "back_pack", "bike", "calculator", "headphones", "keyboard",
    "laptop_computer", "monitor", "mouse", "mug", "projector",
)  # fmt: skip
OFFICE_DOMAINS = ("amazon", "caltech", "dslr", "webcam")
# FedPCE's Digits (§4.1, §5.1): four digit datasets as the domains of one, all at 32 px in
# RGB; its SYN is Roy et al. (2018)'s Synthetic Digits (``syn``), not SynthDigits.
DIGITS_DOMAINS = ("mnist", "svhn", "usps", "syn")
DIGIT5_DOMAINS = ("mnist", "svhn", "usps", "synthdigits", "mnistm")  # FedICON's Digit-5

# The 15 benchmark corruptions of CIFAR-10-C, in the Hendrycks & Dietterich order.
CORRUPTIONS = (
    "gaussian_noise", "shot_noise", "impulse_noise",
    "defocus_blur", "glass_blur", "motion_blur", "zoom_blur",
    "snow", "frost", "fog", "brightness", "contrast",
    "elastic_transform", "pixelate", "jpeg_compression",
)  # fmt: skip
CIFAR10C_DOMAINS = tuple(f"{c}@{s}" for c in CORRUPTIONS for s in range(1, 6))

_MNIST_URL = "https://ossci-datasets.s3.amazonaws.com/mnist/"
_FMNIST_URL = "http://fashion-mnist.s3-website.eu-central-1.amazonaws.com/"
_SVHN_URL = "http://ufldl.stanford.edu/housenumbers/"
_USPS_URL = "https://www.csie.ntu.edu.tw/~cjlin/libsvmtools/datasets/multiclass/"
_DOMAINNET_URL = "http://csr.bu.edu/ftp/visda/2019/multi-source/"
_LIYXI_URL = "https://github.com/liyxi/"
_CIFAR101_URL = "https://github.com/modestyachts/CIFAR-10.1/raw/master/datasets/"
_IDX_NAMES = (
    "train-images-idx3-ubyte.gz",
    "train-labels-idx1-ubyte.gz",
    "t10k-images-idx3-ubyte.gz",
    "t10k-labels-idx1-ubyte.gz",
)


def _idx_files(
    dataset: str,
    base: str,
    md5s: tuple[str, ...],
    sizes: tuple[int, ...],
    sha256s: tuple[str | None, ...] = (None,) * 4,
    content_md5s: tuple[str | None, ...] = (None,) * 4,
) -> tuple[RemoteFile, ...]:
    return tuple(
        RemoteFile(dataset, name, base + name, md5=m, sha256=s, size=n, content_md5=c)
        for name, m, s, n, c in zip(_IDX_NAMES, md5s, sha256s, sizes, content_md5s, strict=True)
    )


def _liyxi_release(
    dataset: str, repo: str, pattern: str, md5s: tuple[str, str], note: str
) -> tuple[RemoteFile, ...]:
    """The train and test files of one of liyxi's GitHub "data" releases."""
    return tuple(
        RemoteFile(
            dataset,
            pattern.format(split=split),
            f"{_LIYXI_URL}{repo}/releases/download/data/{pattern.format(split=split)}",
            md5=md5,
            note=note,
        )
        for split, md5 in zip(("train", "test"), md5s, strict=True)
    )


_DOMAINNET_ZIPS = (  # (domain, url path, sha256 from TFDS, size)
    (
        "clipart",
        "groundtruth/clipart.zip",
        "f8f248a3e8bbc9868c523ae24e6601b4c2ad102afc60c0efeb4f3255df22354d",
        1_270_909_081,
    ),
    (
        "infograph",
        "infograph.zip",
        "891e14f476317e97b6f06d6498c11d0a5b8d0c8b57210765ed9beb072da611fa",
        4_338_659_804,
    ),
    (
        "painting",
        "groundtruth/painting.zip",
        "fa47e6d405503ea0286cabd767f176bd30e988b63ddd7b9db16cf030c9770015",
        3_679_366_174,
    ),
    (
        "quickdraw",
        "quickdraw.zip",
        "9f37df2a8c3733703dbb35ad9964202a65f675ca30137756457537536b485d84",
        459_920_701,
    ),
    (
        "real",
        "real.zip",
        "d7fe010b430c5b510f85d657d38c4a1924822695fabea4fef57bd00dba251d63",
        6_062_039_589,
    ),
    (
        "sketch",
        "sketch.zip",
        "23a7dbae7016b343e934399beaa8a68728fb5e570ebe2c71df9b75cf91c499fc",
        2_633_992_926,
    ),
)


def _digit_composite(name: str, domains: tuple[str, ...]) -> DatasetSpec:
    """A digit benchmark built from digit datasets, one domain each, all 32 px RGB."""
    return DatasetSpec(
        name=name,
        classes=DIGITS,
        channels=3,
        image_size=32,
        splits=("train", "test"),
        domains=domains,
        components=domains,
    )


_DATASETS: tuple[DatasetSpec, ...] = (
    DatasetSpec(
        name="cifar10",
        classes=CIFAR10_CLASSES,
        channels=3,
        image_size=32,
        splits=("train", "test"),
        sizes=(50_000, 10_000),
        parser="cifar",
        remote=(
            RemoteFile(
                "cifar10",
                "cifar-10-python.tar.gz",
                "https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz",
                md5="c58f30108f718f92721af3b95e74349a",
                size=170_498_071,
            ),
        ),
    ),
    DatasetSpec(
        name="cifar100",
        classes=CIFAR100_CLASSES,
        channels=3,
        image_size=32,
        splits=("train", "test"),
        sizes=(50_000, 10_000),
        parser="cifar",
        remote=(
            RemoteFile(
                "cifar100",
                "cifar-100-python.tar.gz",
                "https://www.cs.toronto.edu/~kriz/cifar-100-python.tar.gz",
                md5="eb9058c3a382ffc7106e4002c42a8d85",
                size=169_001_437,
            ),
        ),
    ),
    DatasetSpec(
        name="svhn",
        classes=DIGITS,
        channels=3,
        image_size=32,
        splits=("train", "test"),
        sizes=(73_257, 26_032),
        parser="svhn",
        remote=(
            RemoteFile(
                "svhn",
                "train_32x32.mat",
                _SVHN_URL + "train_32x32.mat",
                md5="e26dedcc434d2e4c54c9b2d4a06d8373",
                sha256="435e94d69a87fde4fd4d7f3dd208dfc32cb6ae8af2240d066de1df7508d083b8",
                size=182_040_794,
            ),
            RemoteFile(
                "svhn",
                "test_32x32.mat",
                _SVHN_URL + "test_32x32.mat",
                md5="eb5a983be6a315427106f1b164d9cef3",
                sha256="cdce80dfb2a2c4c6160906d0bd7c68ec5a99d7ca4831afa54f09182025b6a75b",
                size=64_275_384,
            ),
        ),
    ),
    DatasetSpec(
        name="fmnist",
        classes=FMNIST_CLASSES,
        channels=1,
        image_size=28,
        splits=("train", "test"),
        sizes=(60_000, 10_000),
        parser="idx",
        remote=_idx_files(
            "fmnist",
            _FMNIST_URL,
            (
                "8d4fb7e6c68d591d4c3dfef9ec88bf0d",
                "25c81989df183df01b3e8a0aad5dffbe",
                "bef4ecab320f06d8554ea6380940ec79",
                "bb300cfdad3c16e7a12a480ee83cd310",
            ),
            (26_421_880, 29_515, 4_422_102, 5_148),
            (
                "3aede38d61863908ad78613f6a32ed271626dd12800ba2636569512369268a84",
                "a04f17134ac03560a47e3764e11b92fc97de4d1bfaf8ba1a3aa29af54cc90845",
                "346e55b948d973a97e58d2351dde16a484bd415d4595297633bb08f03db6a073",
                "67da17c76eaffca5446c3361aaab5c3cd6d1c2608764d35dfb1850b086bf8dd5",
            ),
            # the labels' decompressed content, hashed from the official files in
            # zalandoresearch/fashion-mnist@b2617bb:data/fashion/ (their .gz md5 and sha256
            # are the published ones); the images' .gz are not stored there: none recorded
            (None, "9018921c3c673c538a1fc5bad174d6f9", None, "15d484375f8d13e6eb1aabb0c3f46965"),
        ),
    ),
    DatasetSpec(
        name="mnist",
        classes=DIGITS,
        channels=1,
        image_size=28,
        splits=("train", "test"),
        sizes=(60_000, 10_000),
        parser="idx",
        remote=_idx_files(
            "mnist",
            _MNIST_URL,
            (
                "f68b3c2dcbeaaa9fbdd348bbdeb94873",
                "d53e105ee54ea40749a09fcbcd1e9432",
                "9fb629c4189551a2d022fa330f9573f3",
                "ec29112dd5afa0611ce80d1b7f02629c",
            ),
            (9_912_422, 28_881, 1_648_877, 4_542),
            content_md5s=(  # md5 of the decompressed files (same content from any mirror)
                "6bbc9ace898e44ae57da46a324031adb",
                "a25bea736e30d166cdddb491f175f624",
                "2646ac647ad5339dbf082846283269ea",
                "27ae3e4e09519cfbb04c329615203637",
            ),
        ),
    ),
    DatasetSpec(
        name="usps",
        classes=DIGITS,
        channels=1,
        image_size=16,
        splits=("train", "test"),
        sizes=(7_291, 2_007),
        parser="usps",
        remote=(
            RemoteFile(
                "usps", "usps.bz2", _USPS_URL + "usps.bz2", md5="ec16c51db3855ca6c91edd34d0e9b197"
            ),
            RemoteFile(
                "usps",
                "usps.t.bz2",
                _USPS_URL + "usps.t.bz2",
                md5="8ea070ee2aca1ac39742fdd1ef5ed118",
            ),
        ),
    ),
    DatasetSpec(
        name="synthdigits",
        classes=DIGITS,
        channels=3,
        image_size=32,
        splits=("train", "test"),
        parser="synthdigits",
        remote=_liyxi_release(
            "synthdigits",
            "synthetic-digits",
            "synth_{split}.pt.gz",
            ("d0e99daf379597e57448a89fc37ae5cf", "669d94c04d1c91552103e9aded0ee625"),
            "Alternative (FedBN / Digit-5 Google-Drive zips): stage "
            "synth_train_32x32.mat and synth_test_32x32.mat instead.",
        ),
    ),
    # Roy et al. (2018)'s Synthetic Digits, FedPCE's SYN (§4.1: 10,000 training and 2,000
    # validation images; the authors' code reads synthetic_digits/imgs_train|imgs_valid):
    # digits in varied fonts, colours, scales and rotations on COCO backgrounds. It is
    # released on Kaggle (linked from prasunroy/cnn-on-degraded-images), behind a login and
    # without a checksum: staged by hand, checked by content (the parser counts the images).
    DatasetSpec(
        name="syn",
        classes=DIGITS,
        channels=3,
        image_size=32,
        splits=("train", "test"),
        sizes=(10_000, 2_000),
        parser="syn_tree",
        remote=(
            RemoteFile(
                "syn",
                "synthetic-digits.zip",
                None,
                note="Roy et al. 2018 Synthetic Digits, released on Kaggle "
                "(kaggle datasets download -d prasunroy/synthetic-digits). Stage the zip as "
                "<data_root>/syn/synthetic-digits.zip or extracted as <data_root>/syn/"
                "synthetic_digits/imgs_{train,valid}/<0-9>/<image files>; checked by content "
                "(ten digit folders, 10,000 train and 2,000 valid images).",
                extracted="synthetic_digits",
            ),
        ),
    ),
    DatasetSpec(
        name="mnistm",
        classes=DIGITS,
        channels=3,
        # 32×32 RGB: Ganin & Lempitsky's release as staged (measured, issue 33); liyxi's copy
        # is keras_mnistm's 28 px remake (liyxi/mnist-m@df6812b:README.md), resized to 32
        image_size=32,
        splits=("train", "test"),
        parser="mnistm",
        remote=_liyxi_release(
            "mnistm",
            "mnist-m",
            "mnist_m_{split}.pt.tar.gz",
            ("191ed53db9933bd85cc9700558847391", "e11cb4d7fff76d7ec588b1134907db59"),
            "Alternative: stage a folder tree mnist_m/<split>/<digit>/*.png or the "
            "original mnist_m_<split>/ + mnist_m_<split>_labels.txt.",
        ),
    ),
    _digit_composite("digits", DIGITS_DOMAINS),
    _digit_composite("digit5", DIGIT5_DOMAINS),
    DatasetSpec(
        name="tinyimagenet",
        classes=tuple(f"class_{i:03d}" for i in range(200)),
        channels=3,
        image_size=64,
        splits=("train", "test"),
        sizes=(100_000, 10_000),
        parser="tinyimagenet",
        remote=(
            RemoteFile(
                "tinyimagenet",
                "tiny-imagenet-200.zip",
                "http://cs231n.stanford.edu/tiny-imagenet-200.zip",
                md5="90528d7ca1a48142e341f4ef8d21d0de",
                size=248_100_043,
                note="test split = the labelled val/ images (val_annotations.txt).",
            ),
        ),
    ),
    DatasetSpec(
        name="domainnet",
        classes=DOMAINNET_CLASSES,
        channels=3,
        image_size=224,
        splits=("train", "test"),
        domains=DOMAINNET_DOMAINS,
        parser="domain_tree",
        absent_allowed=33,
        absent_why="the cleaned clipart and painting zips pinned here (DomainNet's groundtruth/ "
        "release, TFDS's checksums) lack 11 clipart and 22 painting files that FedBN's split "
        "pickles list, e.g. clipart/bird/clipart_032_000255.jpg; the pickles were made from "
        "the uncleaned zips, which FedBN's README links since med-air/FedBN@5075667:README.md",
        remote=tuple(
            RemoteFile("domainnet", f"{d}.zip", _DOMAINNET_URL + path, sha256=h, size=n)
            for d, path, h, n in _DOMAINNET_ZIPS
        )
        + (
            RemoteFile(
                "domainnet",
                "domainnet_dataset.zip",
                None,
                note="FedBN split pickles (Google Drive id "
                "1_dx2-YDdvnNlQ13DTgDnLoGvMZvMyccR, linked from the med-air/FedBN "
                "README). Stage as <data_root>/domainnet/domainnet_dataset.zip "
                "(or its extracted DomainNet/{site}_{train,test}.pkl files). "
                "No published checksum: record the sha256 printed on first use.",
                extracted="DomainNet",
            ),
        ),
    ),
    DatasetSpec(
        name="office10",
        classes=OFFICE_CLASSES,
        channels=3,
        image_size=256,
        splits=("train", "test"),
        domains=OFFICE_DOMAINS,
        parser="domain_tree",
        remote=(
            RemoteFile(
                "office10",
                "office_caltech_10_dataset.zip",
                None,
                note="FedBN Office-Caltech-10 zip (Google Drive id "
                "1gxhV5xRXQgC9AL4XexduH7hdxDng7bJ3, linked from the med-air/FedBN "
                "README). Stage as <data_root>/office10/office_caltech_10_dataset.zip "
                "or extracted as office_caltech_10/{amazon,caltech,dslr,webcam}/"
                "<class>/*.jpg (+ optional {site}_{train,test}.pkl). "
                "No published checksum: record the sha256 printed on first use.",
                extracted="office_caltech_10",
            ),
        ),
    ),
    DatasetSpec(
        name="cifar10c",
        classes=CIFAR10_CLASSES,
        channels=3,
        image_size=32,
        splits=("test",),
        domains=CIFAR10C_DOMAINS,
        parser="cifar10c",
        remote=(
            RemoteFile(
                "cifar10c",
                "CIFAR-10-C.tar",
                "https://zenodo.org/records/2535967/files/CIFAR-10-C.tar",
                md5="56bf5dcef84df0e2308c6dcbcbbd8499",
                sha256="c72763e101c723b7c507b96205f7e938912a5d587376173b825850cf3cb876a7",
                size=2_918_471_680,
            ),
        ),
    ),
    DatasetSpec(
        name="cifar101",
        classes=CIFAR10_CLASSES,
        channels=3,
        image_size=32,
        splits=("test",),
        sizes=(2_000,),  # v6: 2,000 class-balanced images (modestyachts/CIFAR-10.1 README)
        parser="cifar101",
        remote=(
            RemoteFile(
                "cifar101",
                "cifar10.1_v6_data.npy",
                _CIFAR101_URL + "cifar10.1_v6_data.npy",
                sha256="2997188e5816f5bd545dc77771b6227828c28146049fcecf3fa10775474cacc6",
                size=6_144_128,
            ),
            RemoteFile(
                "cifar101",
                "cifar10.1_v6_labels.npy",
                _CIFAR101_URL + "cifar10.1_v6_labels.npy",
                sha256="ae40beda001693674edc94d925ee8268cfe68905f8f9aff800c8dcdfcd6c9448",
                size=8_128,
            ),
        ),
    ),
    # Mini-only: the synthetic source set that tiny backbones are pretrained on.
    DatasetSpec(
        name="pretrain_source",
        classes=tuple(f"source_{i:03d}" for i in range(128)),
        channels=3,
        image_size=32,
        splits=("train", "test"),
    ),
)

DATASETS: dict[str, DatasetSpec] = {spec.name: spec for spec in _DATASETS}


def split_sizes(name: str) -> dict | None:
    """Images per split of the real dataset ``name`` as the registry records them: ``{split:
    n}``, or for a composite ``{"domains": {component: {split: n}}}`` (its components');
    None where the registry records none (a domain dataset's own domains, a release that
    publishes no counts)."""
    spec = get_dataset(name)
    if spec.components:
        parts = {c: split_sizes(c) for c in spec.components}
        return None if None in parts.values() else {"domains": parts}
    if not spec.sizes or spec.domains:
        return None
    return dict(zip(spec.splits, spec.sizes, strict=True))


def image_count(name: str, assumed: dict) -> int | None:
    """Images over every split (and domain) of the real dataset ``name``: the registry's
    published counts, else ``assumed`` (config ``bench.cost.split_sizes``: ``{split: n}``,
    per domain for a domain dataset, or ``{"domains": {domain: {split: n}}}``); a composite
    adds its components'. None where neither records them."""
    spec = get_dataset(name)
    if spec.sizes:
        return sum(spec.sizes)
    given = assumed.get(name)
    if given is not None and "domains" not in given:
        return sum(given.values()) * max(1, len(spec.domains))
    per_domain = (given or {}).get("domains", {})
    counts = [
        sum(per_domain[d].values())
        if d in per_domain
        else (image_count(d, {}) if spec.components else None)
        for d in spec.domains
    ]
    return sum(counts) if counts and None not in counts else None


def get_dataset(name: str) -> DatasetSpec:
    """Look a dataset up by key; unknown names fail with the list of allowed ones."""
    try:
        return DATASETS[name]
    except KeyError:
        raise ValueError(
            f"unknown dataset {name!r}; allowed: {', '.join(sorted(DATASETS))}"
        ) from None


def raw_sources(name: str) -> tuple[str, ...]:
    """The datasets whose downloaded files ``name`` is built from: its components, or itself."""
    spec = get_dataset(name)
    return spec.components or (spec.name,)

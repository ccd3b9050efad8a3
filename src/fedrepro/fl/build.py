"""What every job needs: a device, thread count, data on the device, a seeded model."""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

import torch
from torch import nn

from fedrepro.arithmetic import DEFAULT_PRECISION, check
from fedrepro.data.partitions.make import test_lists_from
from fedrepro.data.prepared import Split, load_split
from fedrepro.data.transforms.batches import MEAN, STD, channel_stats
from fedrepro.data.transforms.corruptions import COMMON9, CORRUPTIONS, random_corruptions
from fedrepro.device import set_deterministic
from fedrepro.fl.data import DeviceData
from fedrepro.fl.groups import architectures
from fedrepro.fl.public import public_dataset
from fedrepro.models.registry import BACKBONES, create_backbone
from fedrepro.models.tuning import apply_tuning
from fedrepro.models.weights import load_weights


def pick_device(name: str = "auto", threads: int = 1, deterministic: bool = True) -> torch.device:
    """The job's device (config ``device``: ``auto`` takes a visible GPU, else the CPU) with its
    arithmetic made deterministic on a GPU (``train.deterministic``, ``fedrepro.device``).
    ``cuda`` without a visible GPU is refused: a GPU job that lands on a node without one
    would otherwise train on one CPU thread for days."""
    torch.set_num_threads(max(1, int(threads)))
    if name == "auto":
        name = "cuda" if torch.cuda.is_available() else "cpu"
    if name == "cuda" and not torch.cuda.is_available():
        raise RuntimeError(
            "device: cuda, but no GPU is visible to this job (CUDA_VISIBLE_DEVICES="
            f"{os.environ.get('CUDA_VISIBLE_DEVICES', '<unset>')!r}; a Slurm job gets one through "
            "its rule's gpu resource); run with --config device=cpu to train on the CPU"
        )
    dev = torch.device(name)
    set_deterministic(deterministic and dev.type == "cuda")
    return dev


def set_tf32(policy: str) -> None:
    """The one place a run's TF32 policy (``train.tf32``, fedrepro.arithmetic) reaches torch:
    cuBLAS fp32 matmuls in TF32 under ``all``, cuDNN convolutions under ``all`` and ``conv``
    (PyTorch's default), neither under ``none``. The ``allow_tf32`` switches, which torch
    2.14 still reads everywhere (setting its newer ``fp32_precision`` ones makes a later read
    of ``allow_tf32`` raise)."""
    check(DEFAULT_PRECISION, policy)
    torch.backends.cuda.matmul.allow_tf32 = policy == "all"
    torch.backends.cudnn.allow_tf32 = policy != "none"


Stats = tuple[tuple[float, ...], tuple[float, ...]]


def input_stats(cfg: dict, train_images: torch.Tensor | None = None) -> Stats:
    """The one place a run's input normalisation (mean, std per channel) is decided:
    ``train.normalize`` where the paper's code normalises with fixed values (or not at all);
    otherwise the backbone's convention: the statistics its weights were trained with, or,
    for ``stats="dataset"`` backbones (Rebuffi's ResNet-26), the per-channel statistics of the
    run's own training split, which is how Rebuffi's code normalises every dataset."""
    given = cfg.get("train", {}).get("normalize")
    if given is not None:
        return tuple(given["mean"]), tuple(given["std"])
    names = cfg["model"].get("client_backbones") or [cfg["model"]["backbone"]]
    specs = {(s.mean, s.std, s.stats) for s in (BACKBONES.get(n) for n in names) if s}
    if len(specs) > 1:
        raise ValueError("model.client_backbones: the backbones normalise their inputs "
                         "differently; set train.normalize")  # fmt: skip
    spec = BACKBONES.get(cfg["model"]["backbone"])
    if spec is None:
        return MEAN, STD
    if spec.stats == "dataset":
        if train_images is None:
            raise ValueError(f"{cfg['model']['backbone']} normalises with its training split's "
                             "statistics: pass the training images")  # fmt: skip
        return channel_stats(train_images)
    return spec.mean, spec.std


def load_train_test(cfg: dict, data_dir: Path, device, img_size: int | None):
    """A run's prepared train and test splits on the device, both normalised with the run's
    ``input_stats`` (taken from the training split where the backbone asks for it)."""
    data_dir = Path(data_dir)
    split = load_split(data_dir / "train.safetensors", device=device)
    stats = input_stats(cfg, split.images)
    train = device_data(split, img_size, cfg.get("train"), stats)
    test_split = load_split(data_dir / "test.safetensors", device=device)
    return split, train, device_data(test_split, img_size, None, stats)


def pooled(train: DeviceData, test: DeviceData) -> tuple[DeviceData, DeviceData]:
    """Both splits as one pool of images (train first), once with the training input settings
    and once with the test ones; the tensors are shared, not copied twice."""
    images = torch.cat([train.images, test.images])
    labels = torch.cat([train.labels, test.labels])
    return replace(train, images=images, labels=labels), replace(test, images=images, labels=labels)


def held_out(train: DeviceData, test: DeviceData) -> DeviceData:
    """The training images fed with the test input settings (no augmentation): what clients
    evaluate on when their test lists are held-out training images (``train_holdout``)."""
    return replace(test, images=train.images, labels=train.labels)


def public_data(cfg: dict, data_dir: Path, test: DeviceData) -> DeviceData:
    """The run's public data set (``public.dataset``: FedMD's), its training split prepared
    beside the run's dataset and fed with the run's test input settings (``test``'s size and
    normalisation, no augmentation)."""
    name = public_dataset(cfg)
    if not name:
        raise ValueError(f"algorithm {cfg['algorithm']['name']}: give the run a public data set "
                         "(public.dataset)")  # fmt: skip
    split = load_split(Path(data_dir).parent / name / "train.safetensors",
                       device=test.labels.device)  # fmt: skip
    return replace(test, images=split.images, labels=split.labels)


def load_data(
    path: Path,
    device,
    img_size: int | None,
    train: dict | None = None,
    stats: Stats = (MEAN, STD),
):
    """A prepared split moved to the device once, wrapped with its input settings."""
    split: Split = load_split(path, device=device)
    return split, device_data(split, img_size, train, stats)


def device_data(split: Split, img_size: int | None, train: dict | None, stats: Stats):
    """``split`` with its input settings: augmentation from ``train`` (None: no
    augmentation, as for test data) and the normalisation ``stats``."""
    train = train or {}
    return DeviceData(
        split.images,
        split.labels,
        img_size=img_size,
        crop_pad=int(train.get("crop_pad", 0)),
        pad_mode=str(train.get("pad_mode", "zeros")),
        augment_at=str(train.get("augment_at", "input")),
        flip=bool(train.get("flip", False)),
        rotate=float(train.get("rotate", 0.0)),
        flip_p=float(train.get("flip_p", 0.5)),
        rotate_p=float(train.get("rotate_p", 1.0)),
        erase=train.get("erase"),
        views=train.get("views"),
        mean=tuple(stats[0]),
        std=tuple(stats[1]),
    )


def build_model(model_cfg: dict, num_classes: int, seed: int, weights: Path | None, device):
    """The backbone with a seeded head, pretrained weights loaded without the old head, and the
    trainable set of ``model.tuning`` (new adapters are seeded too: one init for all clients)."""
    torch.manual_seed(seed)
    model = create_backbone(
        model_cfg["backbone"],
        num_classes=num_classes,
        in_chans=3,
        img_size=model_cfg.get("img_size"),
    )
    if weights is not None:
        load_weights(model, weights, skip_head=True)
    tuned = apply_tuning(
        model, model_cfg.get("tuning", "full"), **model_cfg.get("tuning_options", {})
    )
    if BACKBONES[model_cfg["backbone"]].channels_last:  # new adapters too
        tuned = tuned.to(memory_format=torch.channels_last)
    return tuned.to(device)


def build_models(
    model_cfg: dict,
    num_classes: int,
    seed: int,
    weights: Path | dict[str, Path] | None,
    device,
    num_clients: int,
) -> tuple[list[nn.Module], list[int]]:
    """One model per architecture group of a run (``fedrepro.fl.groups.architectures``),
    each built as ``build_model`` builds a homogeneous run's, and each client's group.
    ``weights``: the backbone's file, or with ``model.client_backbones`` a file per backbone
    name (``{name: path}``; None: random weights)."""
    names, arch = architectures(model_cfg, num_clients)
    if len(names) == 1:
        return [build_model(model_cfg, num_classes, seed, weights, device)], arch
    if weights is not None and not isinstance(weights, dict):
        raise ValueError("model.client_backbones: give each backbone's weights ({name: file})")
    missing = [n for n in names if weights is not None and n not in weights]
    if missing:
        raise ValueError(f"model.client_backbones: no weights given for {missing[0]!r}")
    alone = {k: v for k, v in model_cfg.items() if k != "client_backbones"}
    files = weights or {}
    return [
        build_model({**alone, "backbone": n}, num_classes, seed, files.get(n), device)
        for n in names
    ], arch


SHIFT_CORRUPTIONS = {"common9": COMMON9, "all": CORRUPTIONS}
SHIFT_KINDS = ("corrupt", "dataset")


def shifted_test(
    shift: dict, seed: int, test: DeviceData, partition: dict, train_labels, data_dir: Path
) -> tuple[DeviceData, dict]:
    """A run's test data and partition under a test-time shift (FedICON §5.1), made once
    per job and seeded by ``seed`` (the run's), so every method adapted from runs of one
    seed sees the same shifted test sets.

    - ``{"kind": "corrupt", ...}``: the same test images, corrupted
      (``shifted_test_images``).
    - ``{"kind": "dataset", "dataset": name}`` (attribute shift): the test split of
      ``name`` (prepared beside the run's dataset, same classes) replaces the run's, and
      each client's test list is drawn from it following the client's label distribution
      (``fedrepro.data.partitions.make.test_lists_from``)."""
    kind = shift.get("kind")
    if kind not in SHIFT_KINDS:
        raise ValueError(f"test_shift.kind: {kind!r} (allowed: {', '.join(SHIFT_KINDS)})")
    if kind == "corrupt":
        return replace(test, images=shifted_test_images(test.images, shift, seed)), partition
    name = shift.get("dataset")
    if not name:
        raise ValueError("test_shift.dataset: required with kind 'dataset'")
    split = load_split(Path(data_dir).parent / name / "test.safetensors", device=test.labels.device)
    classes = partition["num_classes"]
    if len(split.classes) != classes:
        raise ValueError(f"test_shift.dataset {name!r} has {len(split.classes)} classes, "
                         f"the run's dataset {classes}")  # fmt: skip
    lists = test_lists_from(
        partition, train_labels.cpu().numpy(), split.labels.cpu().numpy(), classes, seed
    )
    clients = [{**c, "test": t} for c, t in zip(partition["clients"], lists, strict=True)]
    shifted = replace(test, images=split.images, labels=split.labels)
    return shifted, {**partition, "clients": clients, "test_mode": "split"}


def shifted_test_images(images: torch.Tensor, shift: dict, seed: int) -> torch.Tensor:
    """Test images under the ``corrupt`` shift: every image is corrupted by a corruption
    drawn uniformly per image at severity s (the covariate shift of FedTHE and FedICON;
    ``common9`` is the nine FedICON's code draws from, ``all`` the 15 of CIFAR-10-C), the
    draws seeded by ``seed``."""
    names = shift.get("corruptions", "common9")
    if names not in SHIFT_CORRUPTIONS:
        allowed = ", ".join(SHIFT_CORRUPTIONS)
        raise ValueError(f"test_shift.corruptions: {names!r} (allowed: {allowed})")
    out, _ = random_corruptions(
        images, int(shift.get("severity", 5)), seed, SHIFT_CORRUPTIONS[names]
    )
    return out

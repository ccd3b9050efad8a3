"""Backbone names → builders, tiny siblings, and the tensor names FedPer/FedBN keep local.

Paper-scale names are timm ids with explicit tags, because timm's default tags are other weights
(``vit_base_patch16_224`` → augreg2, ``resnet18`` → a1_in1k). Every backbone has a tiny sibling
of the same family built by the same code (timm classes for timm families), so the mini scale
exercises the paper's loading and surgery paths. Models are always built with random weights and
never touch the network; pretrained weights come from files (``fedrepro.models.weights``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from torch import nn

from fedrepro.models.cnn import FedIconCNN, SimpleCNN
from fedrepro.models.resnet26 import ResNet26
from fedrepro.models.resnet_cifar import CifarResNet

__all__ = [
    "BACKBONES",
    "BackboneSpec",
    "create_backbone",
    "get_spec",
    "head_keys",
    "norm_keys",
    "tiny_sibling",
]

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)
HALF = (0.5, 0.5, 0.5)


@dataclass(frozen=True)
class BackboneSpec:
    """What a backbone name means.

    ``source`` says where pretrained weights come from: ``hf-hub:timm/<id>`` (timm release),
    ``release`` (the ``release`` URL itself, downloaded into the staging folder), ``gdrive:<id>``
    or ``unreleased`` (manual stage-in only), ``workflow`` (a tiny backbone the workflow
    pretrains on synthetic data) or ``scratch`` (trained from random init, nothing to fetch).
    ``release`` is the original release file, accepted pre-staged under
    ``data_root/backbones/<name>/``; ``release_sha256`` its published sha256 or the prefix in
    its file name (torchvision style). ``release_prefix``: the release holds the backbone under
    this key prefix (MoCo-v3's ``module.base_encoder.``; its momentum encoder, predictor and
    projection head are dropped). ``pretrain``: how the workflow pretrains a ``workflow``
    backbone, ``supervised`` or ``contrastive`` (no labels: the self-supervised siblings).
    ``mean``/``std`` are the input normalisation the weights expect; ``stats="dataset"``
    instead normalises every dataset with its own training split's per-channel statistics
    (``fedrepro.fl.build.input_stats``). ``channels_last``: the model's tensors are kept in
    channels-last memory layout (``fedrepro.fl.build.build_model``), for convolutional networks
    measured faster that way; the layout changes the order of floating-point sums, not the
    model."""

    family: str
    timm_id: str | None
    tiny: str
    img_size: int
    source: str
    kwargs: dict[str, Any] = field(default_factory=dict)
    release: str | None = None
    release_sha256: str | None = None
    mean: tuple[float, float, float] = HALF
    std: tuple[float, float, float] = HALF
    stats: str = "weights"  # weights: mean/std above | dataset: each dataset's own
    release_prefix: str | None = None
    pretrain: str = "supervised"  # supervised | contrastive (workflow backbones)
    channels_last: bool = False


_AUGREG = "https://storage.googleapis.com/vit_models/augreg/"
_FT1K = "--imagenet2012-steps_20k-lr_0.01-res_224.npz"


def _vit(tag_id: str, release: str, tiny: str = "vit_tiny_mini") -> BackboneSpec:
    return BackboneSpec("vit", tag_id, tiny, 224, f"hf-hub:timm/{tag_id}", release=release)


def _tv_resnet(tag_id: str, release: str, prefix: str, tiny: str = "resnet_mini") -> BackboneSpec:
    return BackboneSpec(
        "resnet",
        tag_id,
        tiny,
        224,
        f"hf-hub:timm/{tag_id}",
        release=release,
        release_sha256=prefix,
        mean=IMAGENET_MEAN,
        std=IMAGENET_STD,
    )


_MOCO = "https://dl.fbaipublicfiles.com/moco-v3/"


def _moco_vit(width: int, depth: int, heads: int, tiny: str, release: str | None) -> BackboneSpec:
    """A MoCo-v3 ViT (Chen et al. 2021), self-supervised on ImageNet-1k without labels:
    timm's ViT/16 at 224 px with MoCo-v3's widths and heads (its ViT-S has 12 heads, timm's 6),
    ImageNet mean/std (MoCo-v3's ``main_lincls.py``); its fixed sin-cos position embedding is
    a tensor of the checkpoint like any other. No checksum is published: ours is recorded on
    first use."""
    return BackboneSpec(
        "vit",
        None,
        tiny,
        224,
        "release" if release else "unreleased",
        kwargs={"patch_size": 16, "embed_dim": width, "depth": depth, "num_heads": heads},
        release=release,
        mean=IMAGENET_MEAN,
        std=IMAGENET_STD,
        release_prefix="module.base_encoder.",
    )


def _ssl_mini(like: str) -> BackboneSpec:
    """The self-supervised twin of a mini ViT: the same network, pretrained contrastively."""
    spec = BACKBONES[like]
    return BackboneSpec(spec.family, None, f"{like}_ssl", spec.img_size, "workflow",
                        kwargs=spec.kwargs, pretrain="contrastive")  # fmt: skip


BACKBONES: dict[str, BackboneSpec] = {
    # --- paper scale -------------------------------------------------------------------------
    "vit_base_patch16_224.augreg_in21k": _vit(
        "vit_base_patch16_224.augreg_in21k",
        _AUGREG + "B_16-i21k-300ep-lr_0.001-aug_medium1-wd_0.1-do_0.0-sd_0.0.npz",
    ),
    "vit_base_patch16_224.augreg_in21k_ft_in1k": _vit(
        "vit_base_patch16_224.augreg_in21k_ft_in1k",
        _AUGREG + "B_16-i21k-300ep-lr_0.001-aug_medium1-wd_0.1-do_0.0-sd_0.0" + _FT1K,
    ),
    "vit_small_patch16_224.augreg_in21k_ft_in1k": _vit(
        "vit_small_patch16_224.augreg_in21k_ft_in1k",
        _AUGREG
        + "S_16-i21k-300ep-lr_0.001-aug_light1-wd_0.03-do_0.0-sd_0.0"
        + "--imagenet2012-steps_20k-lr_0.03-res_224.npz",
        tiny="vit_s_mini",
    ),
    "vit_large_patch16_224.augreg_in21k_ft_in1k": _vit(
        "vit_large_patch16_224.augreg_in21k_ft_in1k",
        _AUGREG + "L_16-i21k-300ep-lr_0.001-aug_medium1-wd_0.1-do_0.1-sd_0.1" + _FT1K,
    ),
    # FedHPL Tables 12-13 (App. C.4): self-supervised backbones. Meta released MoCo-v3's ViT-S
    # and ViT-B (facebookresearch/moco-v3@38aae44:CONFIG.md); its ViT-L (24 x 1024, 16 heads:
    # the MoCo-v3 paper's) was never released, so the heterogeneous federation's ViT-L client
    # needs a checkpoint staged by hand in MoCo-v3's format
    "vit_small_patch16_224.mocov3": _moco_vit(
        384, 12, 12, "vit_s_mini_ssl", _MOCO + "vit-s-300ep/vit-s-300ep.pth.tar"
    ),
    "vit_base_patch16_224.mocov3": _moco_vit(
        768, 12, 12, "vit_tiny_mini_ssl", _MOCO + "vit-b-300ep/vit-b-300ep.pth.tar"
    ),
    "vit_large_patch16_224.mocov3": _moco_vit(1024, 24, 16, "vit_tiny_mini_ssl", None),
    "resnet18.tv_in1k": _tv_resnet(
        "resnet18.tv_in1k", "https://download.pytorch.org/models/resnet18-f37072fd.pth", "f37072fd"
    ),
    "resnet34.tv_in1k": _tv_resnet(
        "resnet34.tv_in1k",
        "https://download.pytorch.org/models/resnet34-b627a593.pth",
        "b627a593",
        tiny="resnet34_mini",
    ),
    "resnet50.tv_in1k": _tv_resnet(
        "resnet50.tv_in1k",
        "https://download.pytorch.org/models/resnet50-0676ba61.pth",
        "0676ba61",
        tiny="resnet50_mini",
    ),
    # Rebuffi's ImageNet ResNet-26 (residual_adapters README), on Google Drive only, with no
    # published checksum: our sha256 is recorded on first use. The release pickles the whole
    # network; stage its ``state_dict()`` (our tensor names are Rebuffi's). Rebuffi normalises
    # every dataset with its own per-channel mean/std (decathlon_mean_std.pickle, keyed by
    # dataset; `Rebuffi@5c51aa3:imdbfolder_coco.py`), so do we: stats="dataset".
    "resnet26": BackboneSpec(
        "resnet26",
        None,
        "resnet26_mini",
        72,
        "gdrive:16tPH7dsdV6YfA5xCeVn3dKFGegSZS8yb",
        stats="dataset",
    ),
    "cnn_simple": BackboneSpec("simple_cnn", None, "cnn_simple", 32, "scratch"),
    "cnn_fedicon": BackboneSpec("fedicon_cnn", None, "cnn_fedicon", 32, "scratch"),
    "resnet18_in": BackboneSpec("cifar_resnet", None, "resnet18_in_mini", 32, "scratch"),
    # FedPCE(62) (FedPCE §4.3): the same network with widths 62/124/248/496
    "resnet18_in62": BackboneSpec(
        "cifar_resnet",
        None,
        "resnet18_in62_mini",
        32,
        "scratch",
        kwargs={"widths": (62, 124, 248, 496)},
    ),
    # pFedPT's ViT in its original 32×32 setting (FedHPL App. B.3), trained from scratch: width
    # 128, depth 8, MLP ratio 2, 4×4 patches, our reading of Table 5's "1.026" (2^20 units):
    # 1,076,106 scalars with a 10-class head (1.037 with 100 classes), matching every printed digit
    "vit_pfedpt": BackboneSpec(
        "vit",
        None,
        "vit_pfedpt_mini",
        32,
        "scratch",
        kwargs={"patch_size": 4, "embed_dim": 128, "depth": 8, "num_heads": 8, "mlp_ratio": 2.0},
    ),
    # --- mini scale: same families, same code paths ------------------------------------------
    "vit_tiny_mini": BackboneSpec(
        "vit",
        None,
        "vit_tiny_mini",
        16,  # the mini datasets' size: 16 tokens of 4×4 patches
        "workflow",
        kwargs={"patch_size": 4, "embed_dim": 64, "depth": 4, "num_heads": 4},
    ),
    "vit_pfedpt_mini": BackboneSpec(
        "vit",
        None,
        "vit_pfedpt_mini",
        16,
        "scratch",
        kwargs={"patch_size": 4, "embed_dim": 32, "depth": 2, "num_heads": 2, "mlp_ratio": 2.0},
    ),
    "resnet_mini": BackboneSpec(
        "resnet",
        None,
        "resnet_mini",
        32,
        "workflow",
        kwargs={"layers": (1, 1, 1, 1), "channels": (16, 32, 64, 128)},
    ),
    # FedHPL's heterogeneous clients (App. B.2, Table 4) scaled down in proportion. ViT-S/B/L:
    # latents 384:768:1024 = 24:48:64, depths 12:12:24 = 2:2:4; the L sibling is vit_tiny_mini
    # (64 wide, 4 deep: its 4 heads are 16 wide, the S and B siblings' 3 and 6 heads 8 wide,
    # where the paper's heads are all 64 wide), pretrained once for every paper. ResNet-18's
    # sibling is resnet_mini (basic blocks 1-1-1-1, half of 2-2-2-2; widths 16-128, a quarter
    # of 64-512); ResNet-34's and ResNet-50's halve 3-4-6-3 rounded down, ResNet-50's of
    # bottlenecks: latent 4 x 128 = 512, as 2048 = 4 x 512
    "vit_s_mini": BackboneSpec(
        "vit",
        None,
        "vit_s_mini",
        16,
        "workflow",
        kwargs={"patch_size": 4, "embed_dim": 24, "depth": 2, "num_heads": 3},
    ),
    "vit_b_mini": BackboneSpec(
        "vit",
        None,
        "vit_b_mini",
        16,
        "workflow",
        kwargs={"patch_size": 4, "embed_dim": 48, "depth": 2, "num_heads": 6},
    ),
    "resnet34_mini": BackboneSpec(
        "resnet",
        None,
        "resnet34_mini",
        32,
        "workflow",
        kwargs={"layers": (1, 2, 3, 1), "channels": (16, 32, 64, 128)},
    ),
    "resnet50_mini": BackboneSpec(
        "resnet",
        None,
        "resnet50_mini",
        32,
        "workflow",
        kwargs={"block": "bottleneck", "layers": (1, 2, 3, 1), "channels": (16, 32, 64, 128)},
    ),
    "resnet26_mini": BackboneSpec(
        "resnet26",
        None,
        "resnet26_mini",
        32,
        "workflow",
        kwargs={"widths": (16, 32, 64), "depths": (1, 1, 1), "stem_width": 16},
        stats="dataset",  # as its paper-scale sibling
        # one thread, batch 16 at 16 px: 5.2-5.9 -> 3.9-4.1 ms a training step; the Adapters
        # grid's training 17.7 -> 14.9 job-minutes (docs/methods/adapters.md, "Mini scale")
        channels_last=True,
    ),
    "resnet18_in_mini": BackboneSpec(
        "cifar_resnet",
        None,
        "resnet18_in_mini",
        32,
        "scratch",
        kwargs={"widths": (16, 32, 64, 128), "depths": (1, 1, 1, 1)},
    ),
    "resnet18_in62_mini": BackboneSpec(  # the 62/64 narrowing of its paper sibling, rounded
        "cifar_resnet",
        None,
        "resnet18_in62_mini",
        32,
        "scratch",
        kwargs={"widths": (15, 31, 62, 124), "depths": (1, 1, 1, 1)},
    ),
}
# the self-supervised mini siblings (FedHPL Tables 12-13): ViT-B's twin in a federation of
# different models is vit_b_mini_ssl (config scales.mini.federation_backbones)
BACKBONES |= {f"{n}_ssl": _ssl_mini(n) for n in ("vit_tiny_mini", "vit_s_mini", "vit_b_mini")}


def get_spec(name: str) -> BackboneSpec:
    """The spec of a registered backbone; an unknown name lists the known ones."""
    try:
        return BACKBONES[name]
    except KeyError:
        raise KeyError(f"unknown backbone {name!r}; known: {sorted(BACKBONES)}") from None


def tiny_sibling(name: str) -> str:
    """The mini-scale backbone standing in for ``name`` (a mini backbone is its own sibling)."""
    return get_spec(name).tiny


Builder = Callable[[BackboneSpec, int, int, int], nn.Module]


def _build_vit(spec: BackboneSpec, num_classes: int, in_chans: int, img_size: int) -> nn.Module:
    import timm  # imported on use: ~2 s that jobs on our own networks skip

    args = {"num_classes": num_classes, "in_chans": in_chans, "img_size": img_size}
    if spec.timm_id:
        return timm.create_model(spec.timm_id, pretrained=False, **args)
    from timm.models.vision_transformer import VisionTransformer

    return VisionTransformer(**spec.kwargs, **args)


def _build_resnet(spec: BackboneSpec, num_classes: int, in_chans: int, img_size: int) -> nn.Module:
    import timm  # imported on use (see _build_vit)

    args = {"num_classes": num_classes, "in_chans": in_chans}
    if spec.timm_id:
        return timm.create_model(spec.timm_id, pretrained=False, **args)
    from timm.models.resnet import BasicBlock, Bottleneck, ResNet

    kwargs = dict(spec.kwargs)
    block = {"basic": BasicBlock, "bottleneck": Bottleneck}[kwargs.pop("block", "basic")]
    return ResNet(block=block, **kwargs, **args)


_BUILDERS: dict[str, Builder] = {
    "vit": _build_vit,
    "resnet": _build_resnet,
    "resnet26": lambda spec, nc, ic, size: ResNet26(nc, ic, **spec.kwargs),
    "simple_cnn": lambda spec, nc, ic, size: SimpleCNN(nc, ic, size),
    "fedicon_cnn": lambda spec, nc, ic, size: FedIconCNN(nc, ic, size),
    "cifar_resnet": lambda spec, nc, ic, size: CifarResNet(nc, ic, **spec.kwargs),
}


def create_backbone(
    name: str, num_classes: int, in_chans: int = 3, img_size: int | None = None
) -> nn.Module:
    """A randomly initialised backbone; ``num_classes=0`` gives a model without classifier.

    ``img_size`` (default: the backbone's own) matters for ViTs (position embeddings) and the
    small CNNs (flattened size); convolutional ResNets accept any size. Build inside
    ``with torch.device("meta"):`` to count parameters of paper-scale models without memory."""
    spec = get_spec(name)
    return _BUILDERS[spec.family](spec, num_classes, in_chans, img_size or spec.img_size)


_NORM_TYPES = (
    nn.BatchNorm1d,
    nn.BatchNorm2d,
    nn.BatchNorm3d,
    nn.SyncBatchNorm,
    nn.InstanceNorm1d,
    nn.InstanceNorm2d,
    nn.InstanceNorm3d,
    nn.LayerNorm,
    nn.GroupNorm,
    nn.RMSNorm,
)


def _tensor_names(modules: Iterator[tuple[str, nn.Module]]) -> list[str]:
    """Parameter and buffer names (as in ``named_parameters``/``named_buffers``) under modules."""
    names: dict[str, None] = {}
    for prefix, module in modules:
        for name, _ in module.named_parameters(prefix=prefix):
            names[name] = None
        for name, _ in module.named_buffers(prefix=prefix):
            names[name] = None
    return list(names)


def head_keys(model: nn.Module) -> list[str]:
    """Tensor names of the classifier (``model.get_classifier()``, timm's convention)."""
    classifier = model.get_classifier()
    return _tensor_names((n, m) for n, m in model.named_modules() if m is classifier)


def norm_keys(model: nn.Module) -> list[str]:
    """Tensor names of every normalisation layer: BN/IN/LN/GN affine and running statistics."""
    return _tensor_names((n, m) for n, m in model.named_modules() if isinstance(m, _NORM_TYPES))

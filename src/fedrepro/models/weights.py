"""Backbone weights on disk: safetensors in timm's state-dict naming, written atomically.

Real releases (timm safetensors, torchvision ``.pth``, Google ``.npz``, the ResNet-26 ``.pth``) are
converted once by :func:`fetch_backbone`; the mini scale's tiny backbones are saved by the
workflow's pretraining with :func:`save_weights`. Either way runs load them with
:func:`load_weights`, which drops a classifier of another size, so one loading path serves both.
Pickles are never unpickled: ``.pth`` files go through ``torch.load(weights_only=True)``.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterable
from pathlib import Path

import torch
from safetensors.torch import load_file
from torch import nn

from fedrepro.atomic import atomic_write, save_tensors
from fedrepro.checksums import ChecksumError, file_digests
from fedrepro.models.registry import BackboneSpec, create_backbone, get_spec, head_keys

__all__ = [
    "ChecksumError",
    "fetch_backbone",
    "load_weights",
    "save_weights",
    "sha256_file",
    "staged_candidates",
]

StrPath = str | os.PathLike[str]


def save_weights(
    model: nn.Module,
    path: StrPath,
    meta: dict[str, str] | None = None,
    keys: Iterable[str] | None = None,
) -> None:
    """Write the state dict (or only ``keys`` of it) as safetensors via a temp file + rename.

    A killed job therefore never leaves a file that looks finished. Tensors are moved to CPU and
    made contiguous; tensors sharing storage (tied weights) are cloned, which safetensors needs."""
    state = model.state_dict()
    if keys is not None:
        wanted = list(keys)
        missing = [k for k in wanted if k not in state]
        if missing:
            raise KeyError(f"not in the model's state dict: {missing[:5]}")
        state = {k: state[k] for k in wanted}
    tensors: dict[str, torch.Tensor] = {}
    seen: set[int] = set()
    for key, value in state.items():
        tensor = value.detach().to("cpu").contiguous()
        ptr = tensor.untyped_storage().data_ptr()
        if ptr in seen:
            tensor = tensor.clone()
        seen.add(ptr)
        tensors[key] = tensor
    metadata = {str(k): str(v) for k, v in (meta or {}).items()}
    save_tensors(path, tensors, metadata)


def load_weights(model: nn.Module, path: StrPath, skip_head: bool = True) -> list[str]:
    """Load a safetensors file into ``model`` and return the model's keys it did not fill.

    A classifier whose shape differs (other ``num_classes``) is dropped when ``skip_head``; a ViT
    position embedding for another image size is resampled; an RGB stem conv is adapted to the
    model's input channels (summed for grayscale). Any other mismatch, or a file key the model
    lacks, is an error: silently half-loaded backbones make wrong tables."""
    tensors = load_file(str(path), device="cpu")
    target = model.state_dict()
    unexpected = sorted(set(tensors) - set(target))
    if unexpected:
        raise ValueError(f"{path}: {len(unexpected)} keys not in the model, e.g. {unexpected[:5]}")
    heads = set(head_keys(model))
    loaded: dict[str, torch.Tensor] = {}
    for key, tensor in tensors.items():
        want = target[key].shape
        if tensor.shape != want:
            if skip_head and key in heads:
                continue
            tensor = _adapt(model, key, tensor, want)
            if tensor is None:
                raise ValueError(
                    f"{path}: {key} has shape {tuple(tensors[key].shape)}, "
                    f"the model needs {tuple(want)}"
                )
        loaded[key] = tensor
    model.load_state_dict(loaded, strict=False)
    return [k for k in target if k not in loaded]


def _adapt(
    model: nn.Module, key: str, tensor: torch.Tensor, want: torch.Size
) -> torch.Tensor | None:
    """The tensor reshaped for the model where a standard conversion exists, else None."""
    from timm.layers import resample_abs_pos_embed
    from timm.models import adapt_input_conv  # timm imported on use (see registry)

    if key == "pos_embed" and isinstance(getattr(model, "patch_embed", None), nn.Module):
        prefix = 0 if getattr(model, "no_embed_class", False) else model.num_prefix_tokens
        out = resample_abs_pos_embed(
            tensor, new_size=list(model.patch_embed.grid_size), num_prefix_tokens=prefix
        )
        return out if out.shape == want else None
    same_but_inputs = tensor.shape[:1] == want[:1] and tensor.shape[2:] == want[2:]
    if tensor.ndim == 4 and same_but_inputs and tensor.shape[1] == 3:
        return adapt_input_conv(want[1], tensor)
    return None


def sha256_file(path: StrPath) -> str:
    """Hex sha256 of a file, read in 1 MiB chunks."""
    return file_digests(path, ("sha256",))["sha256"]


def _basename(url: str) -> str:
    return url.rsplit("/", 1)[-1]


def staged_candidates(name: str, data_root: StrPath) -> list[Path]:
    """Where a pre-staged release of ``name`` may lie, in the order they are preferred."""
    spec = get_spec(name)
    folder = Path(data_root) / "backbones" / name
    files = ["model.safetensors", "model.pth", "model.npz"]
    if spec.release:
        files.append(_basename(spec.release))
    return [folder / f for f in files]


def _record_path(path: Path) -> Path:
    return path.with_name(path.name + ".sha256")


def _verify(path: Path, expected: str | None) -> str:
    """sha256 of ``path``, checked against the published sha256 (or its prefix) or, lacking one,
    against the sha256 recorded next to the file on its first successful fetch."""
    digest = sha256_file(path)
    record = _record_path(path)
    if expected:
        if not digest.startswith(expected.lower()):
            raise ChecksumError(f"{path}: sha256 {digest} does not match published {expected}")
    elif record.exists():
        recorded = record.read_text().split()[0]
        if recorded != digest:
            raise ChecksumError(
                f"{path}: sha256 {digest} differs from {recorded}, recorded in {record} on "
                "first fetch; delete that record only if the new file is trusted"
            )
    return digest


def _record_first_use(path: Path, digest: str) -> None:
    """Trust on first use: write ``<file>.sha256`` once the file has loaded as the backbone."""
    record = _record_path(path)
    if record.exists():
        return
    try:
        atomic_write(record, lambda tmp: Path(tmp).write_text(f"{digest}  {path.name}\n"))
        print(f"{path}: no published checksum; recorded sha256 {digest}", file=sys.stderr)
    except OSError as err:
        print(f"{path}: cannot record sha256 {digest} ({err})", file=sys.stderr)


def _read_state(path: Path) -> dict[str, torch.Tensor]:
    """Tensors of a safetensors or ``.pth`` file, unwrapping ``{'state_dict': ...}`` wrappers."""
    if path.suffix == ".safetensors":
        return load_file(str(path), device="cpu")
    state = torch.load(path, map_location="cpu", weights_only=True)
    for wrapper in ("state_dict", "model"):
        if isinstance(state, dict) and isinstance(state.get(wrapper), dict):
            state = state[wrapper]
    return state


def _backbone_of(state: dict[str, torch.Tensor], prefix: str) -> dict[str, torch.Tensor]:
    """The backbone a release keeps under ``prefix`` (MoCo-v3: ``module.base_encoder.``),
    without the release's own head (MoCo-v3's projection MLP): the rest (a momentum
    encoder, a predictor) is training state."""
    inner = {k[len(prefix) :]: v for k, v in state.items() if k.startswith(prefix)}
    if not inner:
        raise KeyError(f"no tensor under {prefix!r}")
    return {k: v for k, v in inner.items() if not k.startswith("head.")}


def _load_own(name: str, path: Path) -> nn.Module:
    """A non-timm backbone loaded strictly from ``path``; the head size is read from the file."""
    if path.suffix == ".npz":
        raise ValueError(f"{path}: .npz releases exist only for timm ViTs, not {name}")
    state = _read_state(path)
    prefix = get_spec(name).release_prefix
    if prefix is not None:
        state = _backbone_of(state, prefix)
    with torch.device("meta"):
        probe = create_backbone(name, num_classes=1)
    head_weight = next(k for k in head_keys(probe) if k.endswith("weight"))
    num_classes = state[head_weight].shape[0] if head_weight in state else 0
    model = create_backbone(name, num_classes=num_classes)
    model.load_state_dict(state, strict=True)
    return model


def _load_staged(name: str, spec: BackboneSpec, path: Path) -> nn.Module:
    if spec.timm_id is None:
        return _load_own(name, path)
    # timm converts its own releases (npz through its custom loader) from a local file.
    import timm

    overlay = {"file": str(path), "custom_load": path.suffix == ".npz"}
    return timm.create_model(spec.timm_id, pretrained=True, pretrained_cfg_overlay=overlay)


def _where_from(spec: BackboneSpec) -> str:
    if spec.source == "unreleased":
        return "no public release exists: stage a checkpoint of this architecture there"
    where = spec.release if spec.source == "release" else spec.source
    return f"download from {where} and place the file there"


def fetch_backbone(
    name: str,
    dest: StrPath,
    data_root: StrPath,
    offline: bool = False,
    random: bool = False,
    download: Callable[[str, Path], Path] | None = None,
) -> None:
    """Write ``name``'s pretrained weights (with their original head) as safetensors at ``dest``.

    A file pre-staged under ``data_root/backbones/<name>/`` is verified and converted without
    network; otherwise, unless ``offline``, timm downloads the release, or ``download(url,
    folder)`` one published as a plain URL (``source: release``; the caller passes
    ``fedrepro.data.sources.download.fetch_release``: this layer does no I/O of its own). Tiny
    and from-scratch backbones have nothing to fetch. With ``random`` (the paper-shape smoke), a
    backbone with no staged file gets its random initialisation, written as a fetched one
    (``source: random``)."""
    spec = get_spec(name)
    if spec.source in ("workflow", "scratch"):
        raise ValueError(
            f"{name} has no released weights (source: {spec.source}); nothing to fetch"
        )
    candidates = staged_candidates(name, data_root)
    staged = next((p for p in candidates if p.is_file()), None)
    if staged is None and spec.source == "release" and download and not (offline or random):
        # a release published as a plain URL (MoCo-v3's): into the folder it is staged in
        staged = download(str(spec.release), Path(data_root) / "backbones" / name)
    meta = {"backbone": name, "source": spec.source}
    if staged is not None:
        is_release = spec.release is not None and staged.name == _basename(spec.release)
        expected = spec.release_sha256 if is_release else None
        digest = _verify(staged, expected)
        try:
            model = _load_staged(name, spec, staged)
        except (RuntimeError, KeyError) as err:
            raise ValueError(f"{staged}: not a {name} checkpoint: {err}") from None
        if not expected:
            _record_first_use(staged, digest)
        meta.update(staged=str(staged), sha256=digest)
    elif random:  # no classifier: runs build their own head
        model = create_backbone(name, num_classes=0)
        meta.update(source="random")
    elif offline or spec.timm_id is None:
        raise FileNotFoundError(
            f"{name}: no pre-staged weights (looked for {[str(p) for p in candidates]}); "
            + _where_from(spec)
            + (" (offline mode)" if offline else "")
        )
    else:
        import timm

        model = timm.create_model(spec.timm_id, pretrained=True)
    save_weights(model, dest, meta=meta)

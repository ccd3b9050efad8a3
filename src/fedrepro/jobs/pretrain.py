"""Pretrain a tiny backbone centrally on the synthetic source set (mini scale).

Supervised siblings train on the labels (cross-entropy). Self-supervised ones
(``BackboneSpec.pretrain == "contrastive"``, the mini stand-ins of FedHPL's MoCo-v3
backbones) never read a label: two augmented views of each image, the classifier widened
to a ``projection`` (128) and used as the projection head, NT-Xent over the batch
(``fedrepro.fl.contrastive``; SimCLR's loss, simpler than MoCo-v3's momentum encoder and
predictor, our choice at mini scale); the projection is not saved, as MoCo-v3 releases drop
theirs. The weights are saved in timm naming, so runs load them exactly as they load
fetched paper-scale weights.
"""

from __future__ import annotations

import math
import time
from pathlib import Path

import torch

from fedrepro.fl.build import build_model, load_train_test, pick_device
from fedrepro.fl.contrastive import contrastive_loss, normalized
from fedrepro.fl.local import predict, train_epochs
from fedrepro.fl.sampling import derive_seed
from fedrepro.logs import Pace, job_log
from fedrepro.models.registry import get_spec, head_keys
from fedrepro.models.weights import save_weights


def pretrain_backbone(
    backbone: str,
    data_dir: Path,
    out: Path,
    cfg: dict,
    device: str = "auto",
    threads: int = 1,
    seed: int = 0,
) -> float:
    """Train on `data_dir`'s train split; return test accuracy (%), NaN for a self-supervised
    backbone (its head is a projection, not a classifier). The job's log gets a line per
    epoch: its loss, test accuracy, seconds, images per second and the time left."""
    dev = pick_device(device, threads)
    run = {"model": {"backbone": backbone}, "train": cfg}
    split, train, test = load_train_test(run, Path(data_dir), dev, None)
    contrastive = get_spec(backbone).pretrain == "contrastive"
    if contrastive and not train.views:
        raise ValueError(f"{backbone}: contrastive pretraining needs the config key 'views'")
    outputs = int(cfg.get("projection", 128)) if contrastive else len(split.classes)
    model = build_model({"backbone": backbone}, outputs, seed, None, dev)
    idx = torch.arange(len(train.labels), device=dev)
    gen = torch.Generator(dev).manual_seed(derive_seed(seed, 0xBEEF))
    temperature = float(cfg.get("temperature", 0.2))

    def nt_xent(x: torch.Tensor, _labels: torch.Tensor) -> torch.Tensor:
        return contrastive_loss(normalized(model(x)), None, temperature)

    acc, epochs = math.nan, int(cfg["epochs"])
    pace = Pace(epochs * len(idx))  # images seen, evaluation included in the time
    for epoch in range(1, epochs + 1):
        t0 = time.perf_counter()
        _, loss = train_epochs(
            model,
            train,
            idx,
            {**cfg, "optimizer": cfg.get("optimizer", "sgd")},
            cfg["lr"],
            1,
            gen,
            objective=nt_xent if contrastive else None,
            views=2 if contrastive else 1,
        )
        if not contrastive:
            correct, _ = predict(model, test, torch.arange(len(test.labels), device=dev))
            acc = 100.0 * float(correct.float().mean())
        pace.add(len(idx))
        shown = "self-supervised" if contrastive else f"test acc={acc:.1f}%"
        job_log(
            f"pretrain {backbone} epoch {epoch}/{epochs}: loss={loss:.3f} {shown} "
            f"{time.perf_counter() - t0:.1f}s, {pace.text('images')}"
        )
    head = set(head_keys(model)) if contrastive else set()
    keys = [k for k in model.state_dict() if k not in head]
    meta = {"backbone": backbone, "source": str(data_dir), "acc": f"{acc:.2f}"}
    save_weights(model, out, meta=meta, keys=keys)
    return acc

"""Pretrain a tiny backbone centrally on the synthetic source set (mini scale).

The weights are saved in timm naming, so runs load them exactly as they load
fetched paper-scale weights.
"""

from __future__ import annotations

import time
from pathlib import Path

import torch

from fedrepro.fl.build import build_model, load_train_test, pick_device
from fedrepro.fl.local import predict, train_epochs
from fedrepro.fl.sampling import derive_seed
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
    """Train on `data_dir`'s train split; print progress; return test accuracy (%)."""
    dev = pick_device(device, threads)
    run = {"model": {"backbone": backbone}, "train": cfg}
    split, train, test = load_train_test(run, Path(data_dir), dev, None)
    model = build_model({"backbone": backbone}, len(split.classes), seed, None, dev)
    idx = torch.arange(len(train.labels), device=dev)
    gen = torch.Generator().manual_seed(derive_seed(seed, 0xBEEF))
    acc = 0.0
    for epoch in range(1, int(cfg["epochs"]) + 1):
        t0 = time.perf_counter()
        _, loss = train_epochs(
            model, train, idx, {**cfg, "optimizer": cfg.get("optimizer", "sgd")}, cfg["lr"], 1, gen
        )
        correct, _ = predict(model, test, torch.arange(len(test.labels), device=dev))
        acc = 100.0 * float(correct.float().mean())
        print(
            f"pretrain {backbone} epoch {epoch}: loss={loss:.3f} test acc={acc:.1f}% "
            f"({time.perf_counter() - t0:.1f}s)",
            flush=True,
        )
    save_weights(
        model, out, meta={"backbone": backbone, "source": str(data_dir), "acc": f"{acc:.2f}"}
    )
    return acc

"""Linear probe of a frozen backbone: how much its pretraining transfers (mini scale).

Each dataset's train split goes through the frozen backbone once; a multinomial logistic
regression on the standardised features is fitted by L-BFGS and scored on the test split.
The same probe on the same architecture with random weights is the baseline: the gap is what
pretraining gives a method that freezes the backbone."""

from __future__ import annotations

from pathlib import Path

import torch
import torch.nn.functional as F

from fedrepro.atomic import write_json
from fedrepro.fl.build import build_model, load_train_test, pick_device
from fedrepro.fl.data import DeviceData

EVAL_BATCH = 512
L2 = 1e-3  # on the mean cross-entropy; features are standardised first
ITERATIONS = 300


@torch.no_grad()
def features(model: torch.nn.Module, data: DeviceData) -> torch.Tensor:
    """Pre-logit features of every image (the head's input), in evaluation mode."""
    model.eval()
    idx = torch.arange(len(data.labels), device=data.labels.device)
    out = []
    for part in idx.split(EVAL_BATCH):
        x, _ = data.batch(part)
        out.append(model.forward_head(model.forward_features(x), pre_logits=True).float())
    return torch.cat(out)


def fit_probe(train: torch.Tensor, labels: torch.Tensor, classes: int) -> tuple:
    """Standardisation and a linear classifier (W, b) fitted by L-BFGS (deterministic)."""
    mean, std = train.mean(0), train.std(0) + 1e-6
    z = (train - mean) / std
    weight = torch.zeros(z.shape[1], classes, device=z.device, requires_grad=True)
    bias = torch.zeros(classes, device=z.device, requires_grad=True)
    opt = torch.optim.LBFGS([weight, bias], max_iter=ITERATIONS, line_search_fn="strong_wolfe")

    def closure():
        opt.zero_grad()
        loss = F.cross_entropy(z @ weight + bias, labels) + L2 * weight.square().sum()
        loss.backward()
        return loss

    opt.step(closure)
    return mean, std, weight.detach(), bias.detach()


def probe_accuracy(model: torch.nn.Module, train: DeviceData, test: DeviceData, classes: int):
    mean, std, weight, bias = fit_probe(features(model, train), train.labels, classes)
    logits = ((features(model, test) - mean) / std) @ weight + bias
    return 100.0 * float((logits.argmax(1) == test.labels).float().mean())


def probe_backbone(
    backbone: str,
    weights: Path,
    data_dirs: dict[str, Path],
    out: Path,
    device: str = "auto",
    threads: int = 1,
    seed: int = 0,
) -> list[dict]:
    """Probe accuracy (%) of ``backbone`` with ``weights`` and with random weights on every
    dataset of ``data_dirs``; rows written to ``out`` (JSON) and returned."""
    dev = pick_device(device, threads)
    run = {"model": {"backbone": backbone}, "train": {}}
    rows = []
    for name, data_dir in sorted(data_dirs.items()):
        split, train, test = load_train_test(run, Path(data_dir), dev, None)
        classes = len(split.classes)
        row = {"backbone": backbone, "dataset": name, "classes": classes,
               "train_images": len(train.labels), "test_images": len(test.labels)}  # fmt: skip
        for init, path in (("random", None), ("pretrained", weights)):
            model = build_model(run["model"], classes, seed, path, dev)
            row[init] = round(probe_accuracy(model, train, test, classes), 2)
        row["gain"] = round(row["pretrained"] - row["random"], 2)
        print(f"probe {backbone} on {name}: random {row['random']:.1f}% → pretrained "
              f"{row['pretrained']:.1f}% ({row['gain']:+.1f})", flush=True)  # fmt: skip
        rows.append(row)
    write_json(out, {"backbone": backbone, "weights": str(weights), "rows": rows})
    return rows

"""Device memory of a paper-scale training step, counted on the meta device (no weights, no
data): the model's tensors, the gradients and optimiser state of its trainable set, and the
activations autograd saves for backward in one forward of a training batch (each saved
tensor's storage once; parameters and buffers excluded). Math attention saves its attention
probabilities, so the count is an upper bound for a fused (flash) kernel.

Not counted, and added where a job's memory is sized: the job's data on the device (a run
keeps its splits there), the algorithm's extra state (per-client tensors, control variates)
and the CUDA context."""

from __future__ import annotations

import torch

from fedrepro.fl.build import build_model

__all__ = ["activation_mb", "federation_memory_mb", "step_memory_mb"]

MB = 1e6


def _meta_model(model_cfg: dict, num_classes: int) -> torch.nn.Module:
    """The run's model built on the meta device (shapes only)."""
    with torch.device("meta"):
        return build_model(model_cfg, num_classes, 0, None, "meta")


def activation_mb(
    model_cfg: dict, num_classes: int, batch: int, model: torch.nn.Module | None = None
) -> float:
    """MB autograd saves in one training forward of ``batch`` images (fp32), through ``model``
    where given (the meta model of ``model_cfg``), else one built here."""
    model = _meta_model(model_cfg, num_classes) if model is None else model
    own = {id(t) for t in (*model.parameters(), *model.buffers())}
    saved: dict[int, torch.Tensor] = {}

    def pack(t: torch.Tensor) -> torch.Tensor:
        base = t if t._base is None else t._base
        if id(t) not in own and id(base) not in own:
            saved[id(base)] = base
        return t

    size = int(model_cfg.get("img_size") or 224)
    images = torch.empty(batch, 3, size, size, device="meta")
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        model(images)
    return sum(t.untyped_storage().nbytes() for t in saved.values()) / MB


def step_memory_mb(run: dict, num_classes: int) -> dict[str, float]:
    """A run's training step on the device: ``weights`` (parameters and buffers),
    ``gradients`` and ``optimizer`` (momentum or Adam's two moments) of the trainable set,
    ``activations`` at the run's batch, and their ``total``."""
    model = _meta_model(run["model"], num_classes)
    weights = sum(t.nbytes for t in (*model.parameters(), *model.buffers())) / MB
    trainable = sum(p.nbytes for p in model.parameters() if p.requires_grad) / MB
    train = run["train"]
    moments = 2 if train["optimizer"] == "adam" else int(float(train.get("momentum", 0)) > 0)
    out = {
        "weights": weights,
        "gradients": trainable,
        "optimizer": moments * trainable,
        "activations": activation_mb(run["model"], num_classes, int(train["batch_size"]), model),
    }
    return {**out, "total": sum(out.values())}


def federation_memory_mb(run: dict, num_classes: int) -> dict[str, float]:
    """A training job whose clients hold different models (``model.client_backbones``) on the
    device, as the engine holds it (``fedrepro.fl.groups``): ``weights`` of one module per
    distinct backbone, ``clients`` the trainable tensors every client keeps between its turns
    (its own copy of its model's trainable set), and the ``gradients``, ``optimizer`` and
    ``activations`` of the largest step (one client trains at a time; its optimiser is its
    own for the round); their ``total``. ``copies``, for comparison, is what a module,
    gradients and optimiser state per client held at once would take (with the largest
    step's activations). A run of one backbone counts that one for every client."""
    names = run["model"].get("client_backbones") or [run["model"]["backbone"]]
    alone = {k: v for k, v in run["model"].items() if k != "client_backbones"}
    steps = {n: step_memory_mb({**run, "model": {**alone, "backbone": n}}, num_classes)
             for n in dict.fromkeys(names)}  # fmt: skip
    largest = max(steps.values(), key=lambda s: s["gradients"] + s["optimizer"] + s["activations"])
    out = {
        "weights": sum(s["weights"] for s in steps.values()),
        "clients": sum(steps[n]["gradients"] for n in names),  # a trainable set a client
        "gradients": largest["gradients"],
        "optimizer": largest["optimizer"],
        "activations": largest["activations"],
    }
    held = sum(steps[n]["weights"] + steps[n]["gradients"] + steps[n]["optimizer"] for n in names)
    return {**out, "total": sum(out.values()), "copies": held + largest["activations"]}

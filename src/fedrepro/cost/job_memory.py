"""Device memory of a paper-scale training step, counted on the meta device (no weights, no
data): the model's tensors, the gradients and optimiser state of its trainable set, and the
activations autograd saves for backward in one forward of a training batch (each saved
tensor's storage once; parameters and buffers excluded). Math attention saves its attention
probabilities, so the count is an upper bound for a fused (flash) kernel.

An evaluation forward (no autograd) holds only the tensors alive at once: ``evaluation_mb``
follows every tensor an op creates on the meta device until it is freed and keeps the largest
sum (``LivePeak``); at the evaluation batch of 1024 a ViT's attention and MLP transients can
exceed a small training step's whole memory.

Not counted, and added where a job's memory is sized (``device_mb``): the job's data on the
device (a run keeps its splits there, as uint8), the algorithm's extra state (per-client
tensors, control variates) and the CUDA context."""

from __future__ import annotations

import weakref

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

from fedrepro.fl.build import build_model
from fedrepro.fl.eval_batch import EVAL_BATCH, eval_batch_size

__all__ = [
    "LivePeak",
    "activation_mb",
    "device_mb",
    "evaluation_mb",
    "federation_memory_mb",
    "step_memory_mb",
]

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


class LivePeak(TorchDispatchMode):
    """The largest number of bytes the tensors created inside the block hold at once: every
    op's new outputs (a view or an in-place result shares its input's storage and is not
    counted) are followed until Python frees them."""

    def __init__(self) -> None:
        super().__init__()
        self.live = 0
        self.peak = 0

    def _free(self, nbytes: int) -> None:
        self.live -= nbytes

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if func.is_view:
            return out
        given = {id(t) for t in tree_leaves((args, kwargs)) if isinstance(t, torch.Tensor)}
        for t in tree_leaves(out):
            if isinstance(t, torch.Tensor) and id(t) not in given:
                nbytes = t.untyped_storage().nbytes()
                self.live += nbytes
                self.peak = max(self.peak, self.live)
                weakref.finalize(t, self._free, nbytes)
        return out


def evaluation_mb(model_cfg: dict, num_classes: int, batch: int = EVAL_BATCH) -> dict[str, float]:
    """An evaluation forward of ``batch`` images (fp32, no autograd): ``weights`` and the
    ``transient`` peak of the tensors alive at once (the float batch included), and their
    ``total``."""
    model = _meta_model(model_cfg, num_classes).eval()
    weights = sum(t.nbytes for t in (*model.parameters(), *model.buffers())) / MB
    size = int(model_cfg.get("img_size") or 224)
    live = LivePeak()
    with torch.no_grad(), live:
        model(torch.empty(batch, 3, size, size, device="meta"))
    return {"weights": weights, "transient": live.peak / MB, "total": weights + live.peak / MB}


def device_mb(
    run: dict, num_classes: int, data_mb: float, eval_batch: int | None = None
) -> dict[str, float]:
    """A training job's device memory: its training step (``step_memory_mb``, or
    ``federation_memory_mb`` for clients of different models), its evaluation forward at the
    run's evaluation batch (the larger sets the peak: they never overlap), ``state`` (what
    the algorithm keeps per client and on the server: ``STATE_COPIES``) and ``data`` (its
    splits on the device, ``data_mb``); ``peak`` is the larger of the first two plus the
    others. ``eval_batch`` replaces the default evaluation batch (what an older default
    held) where the run sets none."""
    step, weights, state = _step_parts(run, num_classes)
    batch = eval_batch_size(run["train"], run["model"].get("img_size"))
    batch = batch if eval_batch is None or "eval_batch_size" in run["train"] else eval_batch
    names = run["model"].get("client_backbones") or [run["model"]["backbone"]]
    alone = {k: v for k, v in run["model"].items() if k != "client_backbones"}
    transients = [evaluation_mb({**alone, "backbone": n}, num_classes, batch)["transient"]
                  for n in dict.fromkeys(names)]  # fmt: skip
    evaluate = weights + max(transients)
    return {"step": step, "evaluate": evaluate, "state": state, "data": data_mb,
            "peak": max(step, evaluate) + state + data_mb}  # fmt: skip


def _step_parts(run: dict, num_classes: int) -> tuple[float, float, float]:
    """A run's training step (its total), the weights it holds and its algorithm's state:
    ``federation_memory_mb`` for clients of different models (no per-client state kept
    beyond their trainable sets, which it counts), else ``step_memory_mb`` and ``state_mb``."""
    if run["model"].get("client_backbones"):
        fed = federation_memory_mb(run, num_classes)
        return fed["total"], fed["weights"], 0.0
    step = step_memory_mb(run, num_classes)
    return step["total"], step["weights"], state_mb(run, step)


def state_mb(run: dict, step: dict[str, float]) -> float:
    """What ``run``'s algorithm keeps on the device beyond the model (``STATE_COPIES`` of its
    trainable set, ``step`` its ``step_memory_mb``), for all its clients."""
    server, client = STATE_COPIES.get(run["algorithm"]["name"], (0.0, 0.0))
    clients = int(run["partition"].get("clients", 1))
    state = (server + client * clients) * step["gradients"]
    if run["algorithm"]["name"] == "moon":  # its global and previous models, whole
        state += 2 * step["weights"]
    return state


def step_estimate_mb(run: dict, num_classes: int) -> float:
    """A training step of ``run`` with its algorithm's state: what the GPU check compares a
    measured peak with."""
    step, _, state = _step_parts(run, num_classes)
    return step + state


# copies of the trainable set an algorithm keeps on the device (server, per client) beyond
# the model: FedDC's global drift g and each client's drift h_i and last update g_i
# (algorithms/feddc.py), SCAFFOLD's c and each client's c_i (algorithms/scaffold.py), MOON's
# each client's previous model (algorithms/moon.py; its two reference models: ``device_mb``)
STATE_COPIES = {"feddc": (1.0, 2.0), "scaffold": (1.0, 1.0), "moon": (0.0, 1.0)}


def run_data_mb(plan, run: dict) -> float:
    """MB of the splits a run keeps on its device (uint8 at the prepared side): its dataset's,
    a public data set's (FedMD) and a shifted test set's; a partition converting styles
    (FedIns's γ) holds a styled copy of the training images beside them while it converts."""
    from fedrepro.experiments.plan import public_dataset, shift_dataset

    names = [run["dataset"], public_dataset(run), shift_dataset(run.get("test_shift"))]
    mb = sum(plan.stored_mb(n) for n in dict.fromkeys(n for n in names if n)) * 2**20 / MB
    if run["partition"].get("styles"):
        mb += plan.stored_mb(run["dataset"]) * 2**20 / MB  # the styled copy (train and test: bound)
    return mb


def family(run: dict) -> tuple:
    """A run family: what a training job's device memory depends on (paper, algorithm, the
    clients' backbones, tuning and its options, input side, batch, dataset)."""
    m, t = run["model"], run["train"]
    backbones = "+".join(dict.fromkeys(m.get("client_backbones") or [m["backbone"]]))
    tuning = m.get("tuning", "full")
    if m.get("tuning_options"):
        tuning += " " + ",".join(f"{k}={v}" for k, v in sorted(m["tuning_options"].items()))
    return (run["paper"], run["algorithm"]["name"], backbones, tuning, m.get("img_size"),
            int(t["batch_size"]), run["dataset"])  # fmt: skip


def family_memory(plan, eval_batch: int | None = None) -> list[dict]:
    """Every run family of ``plan`` (``family``) with its device memory (``device_mb``, at
    ``eval_batch`` where given), its runs counted, largest first."""
    from fedrepro.data.sources.registry import DATASETS

    rows: dict[tuple, dict] = {}
    for run in plan.runs.values():
        key = family(run)
        if key not in rows:
            classes = DATASETS[run["dataset"]].num_classes
            data = run_data_mb(plan, run)
            rows[key] = {"family": key, "runs": 0,
                         **device_mb(run, classes, data, eval_batch)}  # fmt: skip
        rows[key]["runs"] += 1
    return sorted(rows.values(), key=lambda r: -r["peak"])


def memory_markdown(after: list[dict], before: list[dict], cards=(24_000, 80_000)) -> str:
    """The run families' device memory (``family_memory``) as a markdown table, families of
    one paper, backbones, tuning, input side and batch on one row (their largest peak), with
    ``before`` (the same families at an older setting) beside it and whether each fits the
    ``cards`` (MB)."""
    old = {r["family"]: r for r in before}
    groups: dict[tuple, dict] = {}
    for r in after:
        paper, algorithm, backbones, tuning, side, batch, dataset = r["family"]
        key = (paper, backbones, tuning, side, batch)
        g = groups.setdefault(key, {"algorithms": set(), "runs": 0, "rows": []})
        g["algorithms"].add(algorithm)
        g["runs"] += r["runs"]
        g["rows"].append((r, old.get(r["family"], r)))
    head = ("| paper | backbone(s), tuning, px, batch | algorithms | runs | step | evaluation "
            "before → now | state | data | peak before → now | " + " | ".join(
                f"{c // 1000} GB" for c in cards) + " |")  # fmt: skip
    lines = [head, "|" + "---|" * (9 + len(cards))]
    ranked = sorted(groups.items(), key=lambda kv: -max(r["peak"] for r, _ in kv[1]["rows"]))
    for (paper, backbones, tuning, side, batch), g in ranked:
        now, was = max(g["rows"], key=lambda rw: rw[0]["peak"])
        short = backbones.replace(".tv_in1k", "").replace("_patch16_224", "")
        fits = ["yes" if now["peak"] <= c else "**no**" for c in cards]
        lines.append(
            f"| {paper} | {short}, {tuning}, {side}, {batch} | {', '.join(sorted(g['algorithms']))}"
            f" | {g['runs']} | {now['step'] / 1e3:.1f} | {was['evaluate'] / 1e3:.1f} → "
            f"{now['evaluate'] / 1e3:.1f} | {now['state'] / 1e3:.1f} | {now['data'] / 1e3:.1f} | "
            f"{was['peak'] / 1e3:.1f} → {now['peak'] / 1e3:.1f} | " + " | ".join(fits) + " |"
        )
    return "\n".join(lines) + "\n"

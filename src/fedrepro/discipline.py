"""The GPU discipline, checked on the CPU: what a step runs that CUDA would not reproduce, and
where it would make the host wait.

``Discipline`` is a ``TorchDispatchMode``: every aten op a block runs passes through it. It
records

- **nondeterministic ops**: those PyTorch 2.14 lists as raising a ``RuntimeError`` under
  ``torch.use_deterministic_algorithms(True)`` because no deterministic CUDA kernel exists
  (the docstring of ``torch.use_deterministic_algorithms``, docs.pytorch.org/docs/2.14/
  generated/torch.use_deterministic_algorithms.html), matched by their aten names and the
  condition the docs give (``bincount`` only with weights, ``nll_loss2d`` only reduced);
  the ops listed there as deterministic under the mode (convolutions, ``index_add``,
  ``scatter_add``, ``gather``'s backward, ``index_put`` with accumulation) are not flagged,
  since jobs run with the mode on (``fedrepro.device.set_deterministic``);
- **host synchronisations**: scalar reads (``.item()``, ``float()``, ``bool()`` of a tensor:
  ``_local_scalar_dense``), reads of whole tensors (``.tolist()``, ``.numpy()``, ``.cpu()``:
  free on the CPU and invisible to a dispatch mode, so caught at the call), tensors built
  from Python values (``torch.tensor``: ``lift_fresh``), ops whose output shape depends on
  values (``nonzero``, boolean indexing, ``masked_select``, ``unique``; CUDA reads the count
  back), and copies between the host and another device;
- **generator mismatches**: a draw whose generator lives on another device than its output
  (CUDA refuses a CPU generator);
- **moved draws**: ``.to(device)`` of a random draw or of anything computed from one. A
  job's draws happen where they are used (``fedrepro.device``); on the CPU such a ``.to`` is
  free and invisible to a dispatch mode, on a GPU it is a copy of a host draw, so it is
  caught at the call (a ``TorchFunctionMode``) on draws tracked through the ops.

``DisciplineClock`` puts the mode around the engine's phases (the clock protocol of
``fedrepro.fl.timing``) and counts per phase, so a test can say "no synchronisation in a
training step" and "one per client-round in an upload". A training or adaptation job run with
the environment variable ``FEDREPRO_DISCIPLINE`` set to a folder runs under one and writes
``<folder>/<run or adaptation id>.json`` (the paper-shape smoke's test reads them).
"""

from __future__ import annotations

import json
import os
import warnings
import weakref
from collections import Counter, defaultdict
from contextlib import contextmanager
from pathlib import Path

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

from fedrepro.device import gpu_paths, is_host_companion

ENV = "FEDREPRO_DISCIPLINE"

# aten op -> when it raises under deterministic mode on CUDA (torch 2.14's list)
_ALWAYS = lambda args, kwargs: True  # noqa: E731


def _weighted_bincount(args, kwargs) -> bool:
    weights = kwargs.get("weights", args[1] if len(args) > 1 else None)
    return weights is not None


def _reduced(args, kwargs) -> bool:
    reduction = kwargs.get("reduction", args[3] if len(args) > 3 else 1)
    return int(reduction) != 0


def _prod(args, kwargs) -> bool:
    reduce = kwargs.get("reduce", args[3] if len(args) > 3 else None)
    return reduce == "prod"


def _max_mode(args, kwargs) -> bool:
    mode = kwargs.get("mode", args[7] if len(args) > 7 else 0)
    return int(mode) == 2


NONDETERMINISTIC_CUDA = {
    "avg_pool3d_backward": _ALWAYS,
    "_adaptive_avg_pool2d_backward": _ALWAYS,
    "_adaptive_avg_pool3d_backward": _ALWAYS,
    "adaptive_max_pool2d_backward": _ALWAYS,
    "fractional_max_pool2d_backward": _ALWAYS,
    "fractional_max_pool3d_backward": _ALWAYS,
    "max_unpool2d": _ALWAYS,
    "max_unpool3d": _ALWAYS,
    "upsample_linear1d_backward": _ALWAYS,
    "upsample_bilinear2d_backward": _ALWAYS,
    "_upsample_bilinear2d_aa_backward": _ALWAYS,
    "upsample_bicubic2d_backward": _ALWAYS,
    "_upsample_bicubic2d_aa_backward": _ALWAYS,
    "upsample_trilinear3d_backward": _ALWAYS,
    "reflection_pad1d_backward": _ALWAYS,
    "reflection_pad2d_backward": _ALWAYS,
    "reflection_pad3d_backward": _ALWAYS,
    "nll_loss2d_forward": _reduced,
    "_ctc_loss_backward": _ALWAYS,
    "_embedding_bag_backward": _max_mode,
    "put_": _ALWAYS,
    "put": _ALWAYS,
    "histc": _ALWAYS,
    "bincount": _weighted_bincount,
    "grid_sampler_2d_backward": _ALWAYS,
    "grid_sampler_3d_backward": _ALWAYS,
    "scatter_reduce": _prod,
    "scatter_reduce_": _prod,
}
_MEDIANS = {"median.dim", "nanmedian.dim"}  # with indices

# ops whose output size is read back by the host on CUDA
_DATA_SHAPED = {"nonzero", "masked_select", "_unique2", "unique_dim", "unique_consecutive",
                "argwhere", "repeat_interleave"}  # fmt: skip
_SCALAR_READS = {"_local_scalar_dense", "is_nonzero", "equal"}
_FROM_PYTHON = {"lift_fresh", "lift_fresh_copy"}
_RANDOM = {"rand", "randn", "randint", "randperm", "bernoulli", "bernoulli_", "multinomial",
           "normal", "normal_", "uniform_", "random_", "exponential_"}  # fmt: skip


def _devices(tree) -> set[str]:
    return {t.device.type for t in _tensors(tree)}


class Discipline(TorchDispatchMode):
    """Records, for the ops run inside it, the nondeterministic ones, the host
    synchronisations and the generator mismatches (the module docstring)."""

    def __init__(self) -> None:
        super().__init__()
        self.nondeterministic: Counter = Counter()
        self.syncs: Counter = Counter()
        self.mismatched: Counter = Counter()
        self.moved = 0  # .to(device) of a draw (HostTraffic)
        self.drawn: dict[int, weakref.ref] = {}  # draws and what was computed from them
        self.host: dict[int, weakref.ref] = {}  # draws of a host companion: the host's own

    def is_drawn(self, t) -> bool:
        ref = self.drawn.get(id(t))
        return ref is not None and ref() is t

    def is_host(self, t) -> bool:
        ref = self.host.get(id(t))
        return ref is not None and ref() is t

    @property
    def sync_count(self) -> int:
        return sum(self.syncs.values())

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = func.overloadpacket.__name__
        full = f"{name}.{func._overloadname}"
        check = NONDETERMINISTIC_CUDA.get(name)
        if (check is not None and check(args, kwargs)) or full in _MEDIANS:
            self.nondeterministic[name] += 1
        if name in _SCALAR_READS or name in _FROM_PYTHON or name in _DATA_SHAPED:
            self.syncs[name] += 1
        elif name == "index" and _bool_index(args):
            self.syncs["index (boolean mask)"] += 1
        out = func(*args, **kwargs)
        if name in ("_to_copy", "copy_") and len(_devices((args, kwargs, out))) > 1:
            self.syncs["copy between host and device"] += 1
        generator = kwargs.get("generator")
        if isinstance(generator, torch.Generator):
            placed = _devices(out)  # meta stands in for a GPU in the CPU tests
            if placed and placed != {generator.device.type}:
                self.mismatched[name] += 1
        if name in _RANDOM or any(self.is_drawn(t) for t in _tensors((args, kwargs))):
            self.drawn.update((id(t), weakref.ref(t)) for t in _tensors(out))
        return out


def _tensors(tree) -> list[torch.Tensor]:
    return [t for t in torch.utils._pytree.tree_leaves(tree) if isinstance(t, torch.Tensor)]


_READS = {torch.Tensor.tolist: "tolist", torch.Tensor.numpy: "numpy", torch.Tensor.cpu: "cpu"}


class HostTraffic(TorchFunctionMode):
    """Counts, into ``discipline``, the calls a dispatch mode cannot see on the CPU: reads of
    whole tensors (``_READS``) and ``Tensor.to`` naming a device on a tracked draw (on the CPU
    neither dispatches anything when the tensor is already there)."""

    def __init__(self, discipline: Discipline) -> None:
        super().__init__()
        self.discipline = discipline

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func in _READS and not (args and self.discipline.is_host(args[0])):
            self.discipline.syncs[_READS[func]] += 1
        named = func is torch.Tensor.to and args and _names_device(args[1:], kwargs)
        if named and self.discipline.is_drawn(args[0]):
            self.discipline.moved += 1
        out = func(*args, **kwargs)
        # a host companion's draws are the host's own (seen here: the dispatcher re-wraps
        # the generator, so its identity is known at this level only)
        generator = kwargs.get("generator")
        if isinstance(generator, torch.Generator) and is_host_companion(generator):
            self.discipline.host.update((id(t), weakref.ref(t)) for t in _tensors(out))
        return out


def _names_device(args, kwargs) -> bool:
    if "device" in kwargs or "other" in kwargs:
        return True
    return any(isinstance(a, torch.device | str | torch.Tensor) for a in args)


@contextmanager
def watched():
    """A ``Discipline`` with its ``HostTraffic`` around the block, the CPU on the GPU's paths
    (``fedrepro.device.gpu_paths``); yields the discipline."""
    mode = Discipline()
    with gpu_paths(), HostTraffic(mode), mode:
        yield mode


def _bool_index(args) -> bool:
    indices = args[1] if len(args) > 1 else []
    return any(
        isinstance(t, torch.Tensor) and t.dtype in (torch.bool, torch.uint8) for t in indices or []
    )


STEP_PHASES = ("data", "step")  # a training step's phases (fedrepro.fl.local.train_epochs)


@contextmanager
def cuda_syncs(on: bool):
    """On a GPU (CUDA initialised) and where ``on``: CUDA's own check around the block,
    ``torch.cuda.set_sync_debug_mode("warn")``, every synchronising CUDA call it reports
    counted by its message (yields the counter, filled when the block ends). "warn", not
    "error": a run goes on to its end and its report lists every wait, the allowed ones
    (docs/gpu.md) included. Elsewhere it counts nothing."""
    seen: Counter = Counter()
    if not (on and torch.cuda.is_available() and torch.cuda.is_initialized()):
        yield seen
        return
    before = torch.cuda.get_sync_debug_mode()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.cuda.set_sync_debug_mode("warn")
        try:
            yield seen
        finally:
            torch.cuda.set_sync_debug_mode(before)
    seen.update(str(w.message).splitlines()[0] for w in caught if "synchroniz" in str(w.message))


class DisciplineClock:
    """The engine's clock protocol (``phase(name)``, ``take()``) with a ``Discipline`` around
    each phase: per phase, how often it ran, its synchronisations and its flagged ops.
    ``data`` and ``step`` are a training step's (``fedrepro.fl.local.train_epochs``)."""

    def __init__(self) -> None:
        self.entries: Counter = Counter()
        self.syncs: dict[str, Counter] = defaultdict(Counter)
        self.nondeterministic: Counter = Counter()
        self.mismatched: Counter = Counter()
        self.moved = 0
        self.cuda_syncs: dict[str, Counter] = defaultdict(Counter)
        self._depth = 0

    @contextmanager
    def phase(self, name: str):
        if self._depth:  # a phase inside another (a server step inside an upload) counts there
            yield
            return
        self._depth += 1
        try:
            with watched() as mode, cuda_syncs(name in STEP_PHASES) as seen:
                yield
        finally:
            self._depth -= 1
            self.cuda_syncs[name].update(seen)
            self.entries[name] += 1
            self.syncs[name].update(mode.syncs)
            self.nondeterministic.update(mode.nondeterministic)
            self.mismatched.update(mode.mismatched)
            self.moved += mode.moved

    def take(self) -> dict[str, float]:
        return {}  # no seconds: the run's history stays as an ordinary run's

    def per_entry(self, name: str) -> float:
        """Synchronisations per entry of phase ``name`` (0 when it never ran)."""
        runs = self.entries[name]
        return sum(self.syncs[name].values()) / runs if runs else 0.0

    def report(self) -> dict:
        """What a job writes (``FEDREPRO_DISCIPLINE``): counts per phase and the flagged ops."""
        return {
            "entries": dict(self.entries),
            "syncs": {k: dict(v) for k, v in self.syncs.items() if v},
            "nondeterministic": dict(self.nondeterministic),
            "generator_mismatch": dict(self.mismatched),
            "moved_draws": self.moved,
            "cuda_syncs": {k: dict(v) for k, v in self.cuda_syncs.items() if v},
        }

    @classmethod
    def from_env(cls) -> DisciplineClock | None:
        """A clock when ``FEDREPRO_DISCIPLINE`` names a folder, else None."""
        return cls() if os.environ.get(ENV) else None

    def write_for(self, name: str) -> None:
        """The report as ``$FEDREPRO_DISCIPLINE/<name>.json``."""
        self.write(Path(os.environ[ENV]) / f"{name}.json")

    def write(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(self.report(), indent=1, sort_keys=True))


def allowed_waits(run: dict, adapt: dict | None = None) -> set[tuple[str, str]]:
    """What a training step of ``run`` (or of its adaptation ``adapt``, the adapt block) still
    waits for, each for a reason (docs/gpu.md, "What a step still waits for"), as (phase,
    op) pairs of a report's ``syncs``; nothing else may appear."""
    allowed = set()
    if adapt and adapt["method"] == "eata":  # the step is skipped when none is selected
        allowed.add(("step", "index (boolean mask)"))
    if run["partition"]["scheme"] == "fedpce_degradation":  # torchvision's adjust_hue
        allowed.add(("data", "lift_fresh"))  # builds its index table from Python values
    return allowed


def unexplained_waits(report: dict, run: dict, adapt: dict | None = None) -> list[str]:
    """A job's report (``DisciplineClock.report``) against ``allowed_waits``: every flagged
    op, mismatched or moved draw, and wait inside a training step that is not allowed, as
    one line each (none: the job keeps the discipline). On a GPU, CUDA's own count of its
    synchronising calls in a step (``cuda_syncs``) is held to the same: none unless a wait
    is allowed in that phase."""
    problems = [f"nondeterministic {op} x{n}" for op, n in report["nondeterministic"].items()]
    problems += [f"generator mismatch {op} x{n}" for op, n in report["generator_mismatch"].items()]
    if report["moved_draws"]:
        problems.append(f"{report['moved_draws']} draws moved to the device")
    allowed = allowed_waits(run, adapt)
    for phase in STEP_PHASES:
        for op, n in report["syncs"].get(phase, {}).items():
            if (phase, op) not in allowed:
                problems.append(f"{phase}: {op} x{n}")
        if not any(p == phase for p, _ in allowed):
            cuda = report.get("cuda_syncs", {}).get(phase, {})
            problems += [f"{phase} (CUDA): {m} x{n}" for m, n in cuda.items()]
    return problems

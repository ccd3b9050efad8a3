"""A run's arithmetic: its precision (``train.precision``), its TF32 policy (``train.tf32``)
and what a device does per second at each, by class of operation.

TF32 policies (PyTorch's two switches, set once per run where the job sets up torch,
``fedrepro.fl.build.set_tf32``): ``conv`` — cuDNN convolutions in TF32, matmuls in full
fp32, PyTorch's own default since 1.12 and ours; ``all`` — matmuls too (PyTorch 1.7–1.11's
default on Ampere and later); ``none`` — full fp32 everywhere (what a pre-Ampere GPU does).
Under bf16 autocast both classes run in bf16, whatever the policy.

Classes of operation, as ``torch.utils.flop_counter`` names them: convolutions (cuDNN's
switch) and everything else it counts (matmuls, batched matmuls, attention: cuBLAS's).
"""

from __future__ import annotations

PRECISIONS = ("fp32", "bf16")
TF32 = ("conv", "all", "none")
DEFAULT_PRECISION = "fp32"  # the papers'
DEFAULT_TF32 = "conv"  # PyTorch's default since 1.12
CLASSES = ("conv", "matmul")


def check(precision: str, tf32: str = DEFAULT_TF32) -> None:
    """One line naming the key for a precision or policy that does not exist."""
    if precision not in PRECISIONS:
        raise ValueError(f"train.precision: {precision!r} (allowed: {', '.join(PRECISIONS)})")
    if tf32 not in TF32:
        raise ValueError(f"train.tf32: {tf32!r} (allowed: {', '.join(TF32)})")


def of_run(run: dict) -> tuple[str, str]:
    """The run's precision and TF32 policy (defaults where its ``train`` block is silent)."""
    train = run.get("train", {})
    precision = train.get("precision", DEFAULT_PRECISION)
    tf32 = train.get("tf32", DEFAULT_TF32)
    check(precision, tf32)
    return precision, tf32


def unit(op_class: str, precision: str, tf32: str) -> str:
    """The device arithmetic an operation of ``op_class`` runs on: fp32, tf32 or bf16."""
    check(precision, tf32)
    if precision == "bf16":
        return "bf16"
    return "tf32" if tf32 == "all" or (tf32 == "conv" and op_class == "conv") else "fp32"


def share(mfu: float | dict, op_class: str, arithmetic: str) -> float:
    """The share of its peak an operation of ``op_class`` attains at ``arithmetic``: ``mfu``
    itself where it is one number, else ``mfu[op_class][arithmetic]`` (the scale's
    ``resources.gpu.mfu``: a convnet's FLOPs are its convolutions, a transformer's its
    matmuls, so the class stands for the kind of network)."""
    if isinstance(mfu, dict):
        return float(mfu[op_class][arithmetic])
    return float(mfu)


def seconds(flops: dict[str, float], precision: str, tf32: str, peaks: dict, mfu) -> float:
    """Time of ``flops`` (FLOPs by class of operation) on a device of ``peaks`` (dense FLOP/s
    per arithmetic: fp32, tf32, bf16), each class at its ``share`` of its arithmetic's peak."""
    total = 0.0
    for c, n in flops.items():
        arithmetic = unit(c, precision, tf32)
        total += float(n) / (float(peaks[arithmetic]) * share(mfu, c, arithmetic))
    return total

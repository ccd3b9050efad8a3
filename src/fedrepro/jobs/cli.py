"""The command line of the engine jobs (train, adapt): the arguments both take."""

from __future__ import annotations

import argparse
from pathlib import Path

from fedrepro.jobs.gpus import claim_gpu


def job_parser(description: str) -> argparse.ArgumentParser:
    """A parser with a job's data, backbone and device arguments (a training or adaptation
    job names each member's partition and output directory in its members' JSON)."""
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--data-dir", type=Path, required=True, help="dir with train/test.safetensors")
    p.add_argument("--backbone", type=Path, nargs="+", default=None,
                   help="pretrained weights (safetensors); clients of different models: one "
                   "<backbone>.safetensors per backbone")  # fmt: skip
    p.add_argument("--device", default="auto")
    p.add_argument("--threads", type=int, default=1)
    return p


def job_files(a: argparse.Namespace) -> dict:
    """The parsed common arguments as keyword arguments of ``train_runs`` / ``adapt_runs``:
    one backbone file as its path, several as ``{backbone name (the file's stem): path}``.
    A GPU job on a machine of several GPUs first takes a free one (``fedrepro.jobs.gpus``)."""
    if a.device in ("cuda", "auto"):
        claim_gpu()
    files = {k: getattr(a, k) for k in ("data_dir", "backbone", "device", "threads")}
    weights = files["backbone"] or []
    files["backbone"] = (
        {w.stem: w for w in weights} if len(weights) > 1 else next(iter(weights), None)
    )
    return files

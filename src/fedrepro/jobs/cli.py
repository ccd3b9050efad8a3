"""The command line of the engine jobs (train, adapt): the arguments both take."""

from __future__ import annotations

import argparse
from pathlib import Path


def job_parser(description: str, one_run: bool = True) -> argparse.ArgumentParser:
    """A parser with a job's data, backbone and device arguments, and with ``one_run`` its
    partition and output directory (a training job names those per run in its runs)."""
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--data-dir", type=Path, required=True, help="dir with train/test.safetensors")
    if one_run:
        p.add_argument("--partition", type=Path, required=True, help="partition JSON")
        p.add_argument("--out-dir", type=Path, required=True, help="the job's output directory")
    p.add_argument("--backbone", type=Path, default=None, help="pretrained weights (safetensors)")
    p.add_argument("--device", default="auto")
    p.add_argument("--threads", type=int, default=1)
    return p


def job_files(a: argparse.Namespace) -> dict:
    """The parsed common arguments as keyword arguments of ``train_runs`` / ``adapt_run``."""
    names = ("data_dir", "partition", "out_dir", "backbone", "device", "threads")
    return {k: getattr(a, k) for k in names if hasattr(a, k)}

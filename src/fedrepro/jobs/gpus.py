"""Which GPU a local job trains on, when a workstation has several.

``snakemake --cores all --resources gpu=N --configfile config/paper.yaml`` runs up to N GPU
jobs at once (each rule asks ``gpu=1``); CUDA would put every one of them on GPU 0. So before
CUDA starts, a job takes a free GPU from the machine's pool and sets ``CUDA_VISIBLE_DEVICES``
to it alone: one lock file a GPU (``fcntl.flock``, held for the job process's life and
released by the kernel when it ends, killed or not). The pool is ``FEDREPRO_GPUS`` (ids,
comma-separated), else ``CUDA_VISIBLE_DEVICES`` as the user set it, else every GPU the NVIDIA
driver lists (``/proc/driver/nvidia/gpus``, read without starting CUDA). A Slurm job
(``SLURM_JOB_ID`` set) keeps the GPU its allocation gives it; a pool of one GPU or none has
nothing to choose. Under the fork server the job claims in its own fork, where CUDA has not
started either.
"""

from __future__ import annotations

import fcntl
import os
import tempfile
import time
from pathlib import Path

POOL = "FEDREPRO_GPUS"
LOCKS = "FEDREPRO_GPU_LOCKS"  # the lock files' folder (default: <tmp>/fedrepro-gpus)
_DRIVER = Path("/proc/driver/nvidia/gpus")
_HELD: list[tuple[str, object]] = []  # (gpu id, its open lock file) for this process


def gpu_pool() -> list[str]:
    """The GPU ids local jobs share (the module docstring)."""
    for var in (POOL, "CUDA_VISIBLE_DEVICES"):
        ids = os.environ.get(var)
        if ids is not None:
            return [i.strip() for i in ids.split(",") if i.strip()]
    return [str(i) for i in range(len(list(_DRIVER.iterdir())))] if _DRIVER.is_dir() else []


def claim_gpu(wait_s: float = 600.0) -> str | None:
    """Take a free GPU of the pool for this process and make it the only one CUDA sees;
    returns its id, or None where there is nothing to choose (a Slurm job, a pool of at most
    one). Waits up to ``wait_s`` for one to free (Snakemake's ``gpu`` resource normally
    leaves one free), then says which lock files are held."""
    if _HELD:
        return _HELD[0][0]
    pool = gpu_pool()
    if "SLURM_JOB_ID" in os.environ or len(pool) <= 1:
        return None
    folder = Path(os.environ.get(LOCKS) or Path(tempfile.gettempdir()) / "fedrepro-gpus")
    folder.mkdir(parents=True, exist_ok=True)
    deadline = time.monotonic() + wait_s
    while True:
        for gpu in pool:
            lock = open(folder / f"gpu-{gpu}.lock", "a")  # noqa: SIM115 (held while the job lives)
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                lock.close()
                continue
            _HELD.append((gpu, lock))
            os.environ["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID"  # the ids as nvidia-smi numbers them
            os.environ["CUDA_VISIBLE_DEVICES"] = gpu
            return gpu
        if time.monotonic() > deadline:
            raise RuntimeError(
                f"no free GPU of {','.join(pool)} after {wait_s:.0f} s (lock files in {folder}); "
                "run with --resources gpu=N for N GPUs, or set FEDREPRO_GPUS"
            )
        time.sleep(1.0)
